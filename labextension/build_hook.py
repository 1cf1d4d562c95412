"""Build step for hatch-jupyter-builder: build the lab extension when Node.js is at hand.

pyproject.toml names ``labextension.build_hook.build_if_node`` as the build function. With
``node`` on PATH it runs hatch-jupyter-builder's ``npm_builder`` (jlpm install + build); without
it the wheel is still built, without the panel, and a warning says so. ``build``/``build:prod``
also build the dashboard page's bundle into mlp_magic/panel/static (pyproject's wheel artifacts).
A build that fails with Node present is an error, not a silent panel-less wheel.
"""
from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

NO_NODE_WARNING = (
    "mlp_magic: Node.js ('node') is not on PATH, so the JupyterLab 'MLP Cluster' panel is not "
    "built and this build does not contain it, nor the dashboard page's bundle (mlp_magic/panel/static: "
    "the page then says so). Everything else works. To get the panel, install "
    "Node.js >= 18 (Debian: apt-get install nodejs npm) and install mlp_magic again, or install a "
    "wheel built where Node.js was present."
)


def _scripts_dir_first() -> None:
    """jlpm and jupyter of the build environment first on PATH (package.json scripts call them)."""
    scripts = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if scripts not in path.split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + path


def _add_install_json(path: str, build_dir: str) -> None:
    """install.json goes with the build only, so a Node-less wheel ships no half extension;
    it makes `jupyter labextension list` say "(python, mlp_magic)"."""
    shutil.copyfile(Path(path) / "install.json", Path(build_dir) / "install.json")


def build_if_node(target_name: str, version: str, **kwargs) -> None:
    if shutil.which("node") is None:
        print(f"WARNING: {NO_NODE_WARNING}", file=sys.stderr)
        warnings.warn(NO_NODE_WARNING, stacklevel=2)
        return
    from hatch_jupyter_builder import npm_builder

    _scripts_dir_first()
    npm_builder(target_name, version, **kwargs)
    _add_install_json(kwargs.get("path", "."), kwargs["build_dir"])
