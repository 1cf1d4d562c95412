"""mlp_magic: run notebook cells on every rank of an MPI job, and shell commands on every host.

``%load_ext mlp_magic`` registers ``%%mpirun``, ``%allrun`` / ``%%allrun`` and ``%mlp_cluster``.
"""
__version__ = "0.1.0"


def load_ipython_extension(ipython):
    import atexit

    from mlp_magic.magics import MlpMagics

    magics = MlpMagics(ipython)
    ipython.register_magics(magics)
    # A kernel restart or shutdown stops the World (its processes would otherwise live on),
    # unless it is kept (%mpirun --keep): its keeper holds it for the next kernel to attach.
    atexit.register(magics.owner.leave)


def unload_ipython_extension(ipython):
    import atexit

    from mlp_magic.world.owner import owner_of

    owner = owner_of(ipython)
    if owner is not None:
        atexit.unregister(owner.leave)
        owner.stop()


def breakpoint(ranks=None, when=True):
    """In a ``%%mpirun`` cell or script: stop this rank here, as ``breakpoint()`` does, only on
    ``ranks`` (a rank, or several; None: every rank) and only where ``when`` is true. The
    stopped ranks take pdb's commands from ``%mpirun --pdb CMD``."""
    import sys

    from mlp_magic.debugging.rank.breakpoints import conditional

    conditional(ranks, when, sys._getframe(1))


def _jupyter_labextension_paths():
    """Where the prebuilt "MLP Cluster" panel lives (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "mlp-magic"}]


def _jupyter_server_extension_points():
    return [{"module": "mlp_magic.panel"}]
