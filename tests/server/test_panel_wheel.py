"""The wheel ships the prebuilt lab extension: built here, installed where Node.js is absent.

Slow (a real wheel build, a fresh virtualenv). The fresh virtualenv gets only the wheel; its
dependencies (jupyterlab, jupyter_server, ...) are borrowed from the running environment through
a .pth line, so the test needs no package index.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(sys.executable).parent
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LABEXTENSION_DATA = "mlp_magic-0.1.0.data/data/share/jupyter/labextensions/mlp-magic/"
SERVER_CONFIG_DATA = "mlp_magic-0.1.0.data/data/etc/jupyter/jupyter_server_config.d/mlp_magic.json"


def copy_checkout(destination: Path) -> Path:
    """The files git would commit (tracked and new, not ignored): no earlier build output."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    node_modules = REPO / "labextension" / "node_modules"
    if node_modules.is_dir():  # saves the download; jlpm install still checks it against yarn.lock
        shutil.copytree(node_modules, destination / "labextension" / "node_modules", symlinks=True,
                        copy_function=os.link)
    return destination


def build_wheel(source: Path, out: Path, path_dirs: list) -> tuple:
    """pip wheel without build isolation (the running environment has the build requirements)."""
    env = dict(os.environ, PATH=os.pathsep.join(str(d) for d in path_dirs))
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
                          "-w", str(out), str(source)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    wheels = list(out.glob("mlp_magic-*.whl"))
    assert len(wheels) == 1
    return wheels[0], run.stdout + run.stderr


def dirs_without_node() -> list:
    """PATH for a machine without Node: only this environment's scripts."""
    assert shutil.which("node", path=str(SCRIPTS)) is None
    return [SCRIPTS]


@pytest.fixture(scope="module")
def wheel_built_with_node(tmp_path_factory) -> Path:
    if shutil.which("node") is None or shutil.which("jlpm") is None:
        pytest.skip("Node.js and jlpm are needed to build the lab extension into the wheel")
    source = copy_checkout(tmp_path_factory.mktemp("checkout"))
    path_dirs = [SCRIPTS] + os.environ["PATH"].split(os.pathsep)
    wheel, _ = build_wheel(source, tmp_path_factory.mktemp("dist"), path_dirs)
    return wheel


def fresh_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # Appended after its own site-packages: the wheel's mlp_magic wins over the editable one here.
    Path(site, "zz_borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def run_without_node(python: Path, *args: str, home: Path) -> str:
    env = {"PATH": str(python.parent), "HOME": str(home), "JUPYTER_PLATFORM_DIRS": "1"}
    assert shutil.which("node", path=env["PATH"]) is None
    done = subprocess.run([str(python), *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return ANSI.sub("", done.stdout + done.stderr)


def test_wheel_carries_the_prebuilt_extension_and_server_config(wheel_built_with_node):
    names = zipfile.ZipFile(wheel_built_with_node).namelist()
    assert LABEXTENSION_DATA + "package.json" in names
    assert LABEXTENSION_DATA + "install.json" in names
    assert any(n.startswith(LABEXTENSION_DATA + "static/remoteEntry.") for n in names)
    assert SERVER_CONFIG_DATA in names
    assert not any(n.startswith("mlp_magic/labextension/") for n in names)  # shipped once, as data


def test_wheel_installed_without_node_lists_the_extension_ok(wheel_built_with_node, tmp_path):
    python = fresh_venv(tmp_path / "venv")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
         str(wheel_built_with_node)],
        env=dict(os.environ, PATH=str(SCRIPTS)), capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr

    listed = run_without_node(python, "-m", "jupyterlab.labextensions", "list", home=tmp_path)
    assert re.search(r"mlp-magic v0\.1\.0 enabled\s+OK \(python, mlp_magic\)", listed), listed
    assert str(tmp_path / "venv") in listed  # found in the fresh environment, not elsewhere

    servers = run_without_node(python, "-m", "jupyter_server.extension.serverextension", "list",
                               home=tmp_path)
    assert re.search(r"mlp_magic\.panel\s+enabled", servers), servers


def test_wheel_builds_without_node_and_says_the_panel_is_missing(tmp_path):
    source = copy_checkout(tmp_path / "checkout")
    wheel, output = build_wheel(source, tmp_path / "dist", dirs_without_node())
    names = zipfile.ZipFile(wheel).namelist()
    assert not any(n.startswith(LABEXTENSION_DATA) for n in names)
    assert SERVER_CONFIG_DATA in names
    assert "mlp_magic/panel/handlers.py" in names
    assert "Node.js ('node') is not on PATH, so the JupyterLab 'MLP Cluster' panel is not built" in output
