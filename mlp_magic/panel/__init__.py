"""The jupyter_server extension behind the "MLP Cluster" lab panel.

Enabled on install through ``jupyter_server_config.d/mlp_magic.json``; by hand:
``jupyter server extension enable mlp_magic.panel``. Settings (``jupyter_server_config.py``)::

    c.MlpMagicPanel.hostfile = "/etc/mlp/hostfile"   # or env MLP_MAGIC_HOSTFILE
    c.MlpMagicPanel.probe_timeout = 1.0              # seconds per ssh-port probe
    c.MlpMagicPanel.cache_seconds = 4.0              # with no panel open: how old a GET's
                                                     # topology and reachability may be

The server keeps one live model of the cluster (``cluster/live``): the Worlds' files are watched,
and every open panel gets its changes over one websocket (``mlp-magic/live``).
"""
from __future__ import annotations

import os

from traitlets import Float, Unicode, default
from traitlets.config import Configurable

from mlp_magic import config
from mlp_magic.cluster.reachability import DEFAULT_TIMEOUT
from mlp_magic.panel.snapshot import DEFAULT_CACHE_SECONDS, DEFAULT_GPU_PROBE_TIMEOUT, panel_model


class MlpMagicPanel(Configurable):
    """Server-side settings of the MLP Cluster panel."""

    hostfile = Unicode(
        help="Hostfile describing the cluster; empty: the environment's (MLP_* variables, Slurm, ...) "
        "or the local machine. Defaults to $MLP_MAGIC_HOSTFILE.",
    ).tag(config=True)
    probe_timeout = Float(DEFAULT_TIMEOUT, help="Seconds to wait for each host's ssh port.").tag(config=True)
    gpu_probe_timeout = Float(DEFAULT_GPU_PROBE_TIMEOUT, help="Seconds to wait for the local GPU probe.").tag(
        config=True
    )
    cache_seconds = Float(
        DEFAULT_CACHE_SECONDS,
        help="With no panel open, how old (seconds) the topology and reachability a GET serves may be.",
    ).tag(config=True)

    @default("hostfile")
    def _hostfile_from_environment(self) -> str:
        return config.panel_hostfile()


def labextension_installed() -> bool:
    """Is the panel's prebuilt lab extension in a Jupyter data path (a Node-less build lacks it)?"""
    from jupyter_core.paths import jupyter_path

    return any(os.path.isfile(os.path.join(folder, "mlp-magic", "package.json"))
               for folder in jupyter_path("labextensions"))


async def _start_jupyter_server_extension(serverapp) -> None:
    """Once the server's event loop runs: start watching the Worlds (the routes would start it at
    their first request otherwise, as in servers that never call this hook)."""
    await serverapp.web_app.settings["mlp_magic_live"].ensure_started()


def _jupyter_server_extension_points() -> list:
    return [{"module": "mlp_magic.panel"}]


def _load_jupyter_server_extension(serverapp) -> None:
    from mlp_magic.panel.handlers import setup_handlers  # tornado/jupyter_server only once a server loads us

    settings = MlpMagicPanel(parent=serverapp)
    live = panel_model(settings.hostfile, settings.probe_timeout, settings.gpu_probe_timeout)
    serverapp.web_app.settings["mlp_magic_live"] = live
    routes = setup_handlers(serverapp.web_app, live, settings.cache_seconds)
    serverapp.log.info("mlp_magic: cluster panel endpoints %s (hostfile: %s)", ", ".join(routes),
                       settings.hostfile or "from the environment")
    if not labextension_installed():
        serverapp.log.warning(
            "mlp_magic: the 'MLP Cluster' JupyterLab panel is not installed in the Jupyter data paths "
            "(mlp_magic was probably built without Node.js); the endpoints work, the panel will not show."
        )
