"""The MLP Cluster panel in a real JupyterLab, driven by headless Chromium (Playwright)."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from mlp_magic.gpu import parse_query_gpu, parse_topo_matrix
from mlp_magic.gpu.pure.smi_topo import merge_query

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
# A real `nvidia-smi topo -m` capture for the GPUs of the host a World reports on; their memory
# and utilisation in nvidia-smi's --query-gpu CSV format (no GPU exists on the test machine).
TOPO_CAPTURE = REPO / "tests/fixtures/topo/h100-4gpu-8nic.txt"
QUERY_GPU = (
    "0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559, 61230, 97\n"
    "1, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, 81559, 60118, 95\n"
    "2, NVIDIA H100 80GB HBM3, 00000000:3A:00.0, 81559, 1024, 3\n"
    "3, NVIDIA H100 80GB HBM3, 00000000:5D:00.0, 81559, 4, 0\n"
)
PANEL = "#mlp-magic-cluster"
PANEL_TAB = '.jp-SideBar .lm-TabBar-tab[data-id="mlp-magic-cluster"]'
UI_TIMEOUT_MS = 60_000


@pytest.fixture
def loopback_hosts():
    """127.0.0.2 answers on its "ssh" port, 127.0.0.3 refuses (bound, never listening)."""
    answering = socket.socket()
    answering.bind(("127.0.0.2", 0))
    answering.listen(8)
    refusing = socket.socket()
    refusing.bind(("127.0.0.3", 0))
    yield answering.getsockname()[1], refusing.getsockname()[1]
    answering.close()
    refusing.close()


@pytest.fixture
def cluster(tmp_path, loopback_hosts, monkeypatch):
    """A hostfile of three hosts and a World (this test process) with engines on two of them."""
    answering_port, refusing_port = loopback_hosts
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(
        f"localhost slots=2\nroot@127.0.0.2:{answering_port}\nroot@127.0.0.3:{refusing_port}\n")
    state_dir = tmp_path / "worlds"
    state_dir.mkdir()
    monkeypatch.setenv("MLP_MAGIC_STATE_DIR", str(state_dir))
    topo = parse_topo_matrix(TOPO_CAPTURE.read_text(), host="127.0.0.2")
    gpus = merge_query(topo, parse_query_gpu(QUERY_GPU))
    world = {
        "pid": os.getpid(),
        "started_at": "2026-01-01T00:00:00+00:00", "updated_at": "2026-01-01T00:00:00+00:00",
        "np": 3, "mpi": "openmpi",
        "ranks": [
            {"rank": 0, "host": "localhost", "engine_id": 0, "state": "idle"},
            {"rank": 1, "host": "localhost", "engine_id": 1, "state": "busy"},
            {"rank": 2, "host": "127.0.0.2", "engine_id": 2, "state": "idle"},
        ],
        "gpus": {"127.0.0.2": gpus.to_dict()},
    }
    (state_dir / f"{os.getpid()}.json").write_text(json.dumps(world))
    return hostfile


def open_panel(browser, lab):
    page = browser.new_page(viewport={"width": 1400, "height": 850})
    page.goto(f"{lab.url}lab?token={lab.token}")
    page.locator(PANEL_TAB).click(timeout=UI_TIMEOUT_MS)
    return page


def row_class(page, host: str) -> str:
    return page.locator(f'{PANEL} tr[data-host="{host}"]').get_attribute("class")


def test_panel_shows_every_host(browser, start_lab, cluster):
    lab = start_lab(hostfile=str(cluster))
    page = open_panel(browser, lab)

    rows = page.locator(f"{PANEL} tr.jp-MlpCluster-host")
    rows.first.wait_for(timeout=UI_TIMEOUT_MS)
    for name in ("localhost", "127.0.0.2", "127.0.0.3"):
        row = page.locator(f'{PANEL} tr[data-host="{name}"]')
        assert row.locator("td").first.inner_text() == name
    assert rows.count() == 3
    assert "jp-MlpCluster-reachable-yes" in row_class(page, "127.0.0.2")
    assert "jp-MlpCluster-reachable-no" in row_class(page, "127.0.0.3")
    localhost_cells = page.locator(f'{PANEL} tr[data-host="localhost"] td').all_inner_texts()
    assert localhost_cells[1:3] == ["2", "0-1"] and localhost_cells[4] == "1 idle\n1 busy"
    assert page.locator(f"{PANEL} .jp-MlpCluster-gpu").count() == 4
    assert "59.8 / 79.6 GiB" in page.locator(f"{PANEL} .jp-MlpCluster-gpu").first.inner_text()
    assert page.locator(f"{PANEL} .jp-MlpCluster-status").inner_text().startswith("updated ")

    with page.expect_response(lambda reply: "/mlp-magic/cluster/refresh" in reply.url) as refresh:
        page.locator(f"{PANEL} .jp-MlpCluster-refresh").click()
    assert refresh.value.request.method == "POST" and refresh.value.status == 200

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "mlp-cluster-panel.png"))
    page.close()


def test_panel_says_when_the_server_extension_is_missing(browser, start_lab, cluster):
    lab = start_lab(server_extension=False)
    page = open_panel(browser, lab)

    message = page.locator(f"{PANEL} .jp-MlpCluster-error")
    message.wait_for(timeout=UI_TIMEOUT_MS)
    assert "server extension is not enabled" in message.inner_text()

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "mlp-cluster-panel-no-server-extension.png"))
    page.close()


class SocketLog:
    """The page's websockets to the panel's live route: when each opened and closed."""

    def __init__(self, page):
        self.opened: list = []
        self.closed: list = []
        page.on("websocket", self._opened)

    def _opened(self, socket) -> None:
        if "/mlp-magic/live" in socket.url:
            self.opened.append(socket)
            socket.on("close", lambda _socket: self.closed.append(socket))

    def open_now(self) -> int:
        return len(self.opened) - len(self.closed)


def test_panel_stands_by_while_hidden(browser, start_lab, cluster):
    lab = start_lab(hostfile=str(cluster))
    page = browser.new_page()
    sockets = SocketLog(page)
    polled = []
    page.on("request", lambda req: "/mlp-magic/cluster" in req.url and polled.append(req.url))
    page.goto(f"{lab.url}lab?token={lab.token}")
    tab = page.locator(PANEL_TAB)
    tab.wait_for(timeout=UI_TIMEOUT_MS)
    page.wait_for_timeout(2000)
    assert sockets.opened == [] and polled == []  # never shown: no connection, no request

    tab.click()
    page.locator(f"{PANEL} .jp-MlpLive-connection[data-state=live]").wait_for(timeout=UI_TIMEOUT_MS)
    page.locator(f"{PANEL} tr.jp-MlpCluster-host").first.wait_for(timeout=UI_TIMEOUT_MS)
    assert sockets.open_now() == 1 and polled == []  # shown: one live socket, nothing polled

    tab.click()  # collapses the sidebar: the panel is hidden
    page.locator(PANEL).wait_for(state="hidden", timeout=UI_TIMEOUT_MS)
    deadline = time.monotonic() + 10
    while sockets.open_now() and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert sockets.open_now() == 0 and len(sockets.opened) == 1
    page.wait_for_timeout(2000)
    assert len(sockets.opened) == 1 and polled == []   # hidden: it stays closed

    tab.click()  # shown again: a new connection brings it up to date
    deadline = time.monotonic() + 10
    while len(sockets.opened) < 2 and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert sockets.open_now() == 1 and len(sockets.opened) == 2 and polled == []
    page.close()
