"""A real JupyterLab on 127.0.0.1 with the panel's extensions, for headless Chromium."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LABEXTENSION_SOURCE = REPO / "labextension"
LABEXTENSION_BUILD = REPO / "mlp_magic" / "labextension"
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
LAB_START_TIMEOUT = 90.0


def _newest_mtime(paths) -> float:
    newest = 0.0
    for top in paths:
        for path in [top] if top.is_file() else top.rglob("*"):
            if path.is_file():
                newest = max(newest, path.stat().st_mtime)
    return newest


def _build_is_stale() -> bool:
    built = LABEXTENSION_BUILD / "package.json"
    if not built.exists():
        return True
    sources = [LABEXTENSION_SOURCE / name for name in ("src", "style", "package.json")]
    return _newest_mtime(sources) > built.stat().st_mtime


@pytest.fixture(scope="session")
def built_labextension() -> Path:
    """The prebuilt lab extension, built here first when missing or older than its sources."""
    if _build_is_stale():
        jlpm = shutil.which("jlpm")
        if shutil.which("node") is None or jlpm is None:
            pytest.skip("the lab extension is not built and Node.js/jlpm are not on PATH to build it")
        for step in (["install"], ["run", "build:prod"]):
            subprocess.run([jlpm, *step], cwd=LABEXTENSION_SOURCE, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    return LABEXTENSION_BUILD


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (Debian package 'chromium')")
    return CHROMIUM


# Module scope, not session: Playwright's sync API keeps an asyncio loop running in the main
# thread while it is open, which breaks every later test that runs a loop of its own.
@pytest.fixture(scope="module")
def browser(chromium_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path, headless=True)
        yield chromium
        chromium.close()


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LabServer:
    """`jupyter lab` in its own config/data/runtime dirs, stopped (by its own pid) on close."""

    def __init__(self, home: Path, labextensions: Path, server_extension: bool, panel_config: dict,
                 port: int | None = None, token: str | None = None):
        self.port = port or free_loopback_port()   # a given port: the same server, restarted
        self.token = token or secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log_path = home / "lab.log"
        config_dir = home / "config"
        config_dir.mkdir(parents=True)
        (home / "root").mkdir()
        server_config = {
            "ServerApp": {
                "ip": "127.0.0.1", "port": self.port, "port_retries": 0,
                "open_browser": False, "allow_root": True,
                "root_dir": str(home / "root"),
                "jpserver_extensions": {"mlp_magic.panel": server_extension},
            },
            "IdentityProvider": {"token": self.token},
            "MlpMagicPanel": panel_config,
        }
        lab_config = {
            "LabApp": {
                "extra_labextensions_path": [str(labextensions)],
                "workspaces_dir": str(home / "workspaces"),
                "user_settings_dir": str(home / "settings"),
                "news_url": None,  # no traffic beyond loopback
                "extension_manager": "readonly",
            }
        }
        # No "get Jupyter news?" toast over the screenshots (and no news fetching).
        notification = home / "settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings"
        notification.parent.mkdir(parents=True)
        notification.write_text(json.dumps({"fetchNews": "false"}))
        (config_dir / "jupyter_server_config.json").write_text(json.dumps(server_config))
        (config_dir / "jupyter_lab_config.json").write_text(json.dumps(lab_config))
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config_dir), JUPYTER_DATA_DIR=str(home / "data"),
                   JUPYTER_RUNTIME_DIR=str(home / "runtime"))
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen([sys.executable, "-m", "jupyterlab"], env=env, cwd=home,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + LAB_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.process.returncode}):\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}api/status?token={self.token}", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        self.close()
        raise RuntimeError(f"jupyter lab did not answer within {LAB_START_TIMEOUT:g} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()


@pytest.fixture(scope="session")
def labextensions_dir(tmp_path_factory, built_labextension) -> Path:
    """A labextensions folder holding only this checkout's build, under its npm name."""
    folder = tmp_path_factory.mktemp("labextensions")
    (folder / "mlp-magic").symlink_to(built_labextension, target_is_directory=True)
    return folder


@pytest.fixture
def start_lab(tmp_path, labextensions_dir):
    servers = []

    def start(server_extension: bool = True, port: int | None = None, token: str | None = None,
              **panel_config) -> LabServer:
        server = LabServer(tmp_path / f"lab{len(servers)}", labextensions_dir, server_extension, panel_config,
                           port, token)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """The folder where kernels publish their Worlds, for this test (the lab server's too)."""
    folder = tmp_path / "worlds"
    folder.mkdir()
    monkeypatch.setenv("MLP_MAGIC_STATE_DIR", str(folder))
    ARTIFACTS.mkdir(exist_ok=True)
    return folder


@pytest.fixture
def hostfile_64(tmp_path):
    """64 hosts of 8 slots on loopback addresses."""
    path = tmp_path / "hostfile"
    path.write_text("".join(f"127.0.1.{h + 1} slots=8\n" for h in range(64)))
    return path
