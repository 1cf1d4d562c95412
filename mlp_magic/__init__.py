"""mlp_magic: run notebook cells on every rank of an MPI job, and shell commands on every host.

``%load_ext mlp_magic`` registers ``%%mpirun``, ``%allrun`` / ``%%allrun`` and ``%mlp_cluster``.
"""
__version__ = "0.1.0"


def load_ipython_extension(ipython):
    import atexit

    from mlp_magic.magics import MlpMagics, shutdown_worlds

    ipython.register_magics(MlpMagics)
    # A kernel restart or shutdown stops the World (its processes would otherwise live on).
    atexit.unregister(shutdown_worlds)
    atexit.register(shutdown_worlds)


def unload_ipython_extension(ipython):
    from mlp_magic.magics import shutdown_worlds

    shutdown_worlds()


def _jupyter_labextension_paths():
    """Where the prebuilt "MLP Cluster" panel lives (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "mlp-magic"}]


def _jupyter_server_extension_points():
    return [{"module": "mlp_magic.panel"}]
