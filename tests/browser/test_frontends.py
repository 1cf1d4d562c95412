"""The live view everywhere a user looks (issue 34), each in headless Chromium on a real 4-rank
World run by a kernel-like process: JupyterLab's main-area tab, Notebook 7's side panel, the
plain page GET mlp-magic/dashboard under JupyterLab's server, and `mlp-magic dashboard` alone.
Each shows rank 2 busy while it sleeps and all idle after (how soon: printed; the bound only
guards against a hang, benchmarks/live_latency.py measures it)."""
from __future__ import annotations

import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import pytest
from conftest import LabServer, free_loopback_port
from live_world import PANEL, PANEL_TAB, UI_TIMEOUT_MS, Kernel, busy_until

from tests.timing import hang_bound

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
IDLE_4 = {r: "idle" for r in range(4)}
RANK_2_BUSY = {0: "idle", 1: "idle", 2: "busy", 3: "idle"}
TAB_PANEL = "#mlp-magic-cluster-tab"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """One real 4-rank World for the module, its records in a private folder every server reads."""
    folder = tmp_path_factory.mktemp("worlds")
    before = os.environ.get("MLP_MAGIC_STATE_DIR")
    os.environ["MLP_MAGIC_STATE_DIR"] = str(folder)   # the servers started below inherit it
    ARTIFACTS.mkdir(exist_ok=True)
    started = Kernel(folder)
    try:
        started.run("%%mpirun -np 4\npass")
        assert started.next(120) == {"ended": True, "error": None}
        yield started
    finally:
        started.close()
        if before is None:
            os.environ.pop("MLP_MAGIC_STATE_DIR", None)
        else:
            os.environ["MLP_MAGIC_STATE_DIR"] = before


def states(page, root: str) -> dict:
    rows = page.eval_on_selector_all(f"{root} .jp-MlpLive-rank[data-rank]",
                                     "rows => rows.map(r => [r.dataset.rank, r.dataset.state])")
    return {int(rank): state for rank, state in rows}


def wait_for_states(page, root: str, wanted: dict, seconds: float) -> float | None:
    waited = 0.0
    while waited < seconds:
        if all(states(page, root).get(rank) == state for rank, state in wanted.items()):
            return waited
        page.wait_for_timeout(10)
        waited += 0.01
    return None


def shows_the_world_live(kernel, page, root: str, screenshot: str) -> None:
    """All idle; rank 2 busy while it sleeps (printed: how soon); all idle again."""
    page.locator(f"{root} .jp-MlpLive-connection[data-state=live]").wait_for(timeout=UI_TIMEOUT_MS)
    assert wait_for_states(page, root, IDLE_4, hang_bound(1.0)) is not None
    bound, seen = hang_bound(1.0), Path(tempfile.mkdtemp(prefix="mlp-seen-")) / "seen"
    try:
        kernel.run(busy_until(2, seen, bound + 2))
        try:
            started = page.evaluate("performance.now()")
            shown = wait_for_states(page, root, RANK_2_BUSY, bound)
            took = (page.evaluate("performance.now()") - started) / 1000
            page.screenshot(path=str(ARTIFACTS / screenshot))
        finally:
            seen.touch()
        print(f"\n{screenshot}: rank 2 shown busy {took:.3f} s after the cell was sent")
        assert shown is not None, f"rank 2 was never shown busy on {screenshot}"
        assert kernel.next(30) == {"ended": True, "error": None}
    finally:   # once the cell ended: rank 2 saw the flag
        shutil.rmtree(seen.parent, ignore_errors=True)
    assert wait_for_states(page, root, IDLE_4, bound) is not None


def test_the_sidebar_link_opens_a_wide_main_area_tab(browser, start_lab, kernel):
    lab = start_lab()
    page = browser.new_page(viewport={"width": 1600, "height": 900})
    page.goto(f"{lab.url}lab?token={lab.token}")
    page.locator(PANEL_TAB).click(timeout=UI_TIMEOUT_MS)
    page.locator(f"{PANEL} .jp-MlpCluster-openTab").click(timeout=UI_TIMEOUT_MS)
    tab = page.locator(f".jp-MainAreaWidget {TAB_PANEL}")
    tab.wait_for(timeout=UI_TIMEOUT_MS)
    title = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="MLP Cluster")
    assert title.count() == 1 and title.locator(".lm-TabBar-tabCloseIcon").count() == 1   # closable
    shows_the_world_live(kernel, page, TAB_PANEL, "mlp-lab-tab.png")
    assert "jp-mod-wide" in tab.get_attribute("class")   # over 900 px: worlds beside the GPUs
    assert "jp-mod-wide" not in page.locator(PANEL).get_attribute("class")   # the sidebar's: narrow
    page.locator(f"{PANEL} .jp-MlpCluster-openTab").click()   # the same tab again, not a second
    assert page.locator(TAB_PANEL).count() == 1
    title.locator(".lm-TabBar-tabCloseIcon").click()
    tab.wait_for(state="detached", timeout=UI_TIMEOUT_MS)
    page.keyboard.press("Control+Shift+C")   # the command palette has the command too
    page.locator(".lm-CommandPalette-input").fill("Open MLP Cluster in a tab")
    page.keyboard.press("Enter")
    tab.wait_for(timeout=UI_TIMEOUT_MS)
    page.wait_for_timeout(1500)   # the layout is saved a moment after a change
    page.reload()
    tab.wait_for(timeout=UI_TIMEOUT_MS)   # restored (ILayoutRestorer)
    page.locator(f"{TAB_PANEL} .jp-MlpLive-connection[data-state=live]").wait_for(timeout=UI_TIMEOUT_MS)
    page.close()


class NotebookServer(LabServer):
    """`jupyter notebook` (Notebook 7), configured as conftest's LabServer configures JupyterLab."""

    def __init__(self, home: Path, labextensions: Path):   # noqa: super().__init__ would start lab
        self.port, self.token = free_loopback_port(), secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log_path = home / "notebook.log"
        config = home / "config"
        config.mkdir(parents=True)
        (home / "root").mkdir()
        (config / "jupyter_server_config.json").write_text(json.dumps({
            "ServerApp": {"ip": "127.0.0.1", "port": self.port, "port_retries": 0, "open_browser": False,
                          "allow_root": True, "root_dir": str(home / "root"),
                          "jpserver_extensions": {"mlp_magic.panel": True}},
            "IdentityProvider": {"token": self.token}}))
        (config / "jupyter_notebook_config.json").write_text(json.dumps({
            "JupyterNotebookApp": {"workspaces_dir": str(home / "workspaces"),
                                   "user_settings_dir": str(home / "settings")}}))
        # In the data folder, searched first (JUPYTER_PREFER_ENV_PATH=0: an environment's copy of
        # mlp_magic would come first), not extra_labextensions_path: Notebook 7 lists an extension
        # found there but serves its files from the data paths only (a 404).
        (home / "data" / "labextensions").mkdir(parents=True)
        (home / "data" / "labextensions" / "mlp-magic").symlink_to((labextensions / "mlp-magic").resolve())
        env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config), JUPYTER_DATA_DIR=str(home / "data"),
                   JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTER_PREFER_ENV_PATH="0")
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen([sys.executable, "-m", "notebook"], env=env, cwd=home,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_until_ready()


@pytest.fixture
def notebook7(tmp_path, labextensions_dir):
    pytest.importorskip("notebook", minversion="7", reason="Notebook 7 is not installed")
    server = NotebookServer(tmp_path / "nb", labextensions_dir)
    yield server
    server.close()


def test_notebook_7_shows_the_panel_in_its_left_side_area(browser, notebook7, kernel):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{notebook7.url}tree?token={notebook7.token}")
    page.get_by_role("menuitem", name="View").click(timeout=UI_TIMEOUT_MS)
    page.locator(".lm-Menu-item", has_text="Left Sidebar").hover()
    page.get_by_role("menuitem", name="Show MLP Cluster").click(timeout=UI_TIMEOUT_MS)
    page.locator(PANEL).wait_for(timeout=UI_TIMEOUT_MS)
    shows_the_world_live(kernel, page, PANEL, "mlp-notebook7.png")
    # Notebook 7's main area holds its page only: "open in a tab" opens the plain page instead.
    with page.context.expect_page() as opened:
        page.locator(f"{PANEL} .jp-MlpCluster-openTab").click()
    dashboard = opened.value
    dashboard.wait_for_load_state()
    assert dashboard.url.split("?")[0] == f"{notebook7.url}mlp-magic/dashboard"
    dashboard.locator(f"{PANEL} .jp-MlpLive-connection[data-state=live]").wait_for(timeout=UI_TIMEOUT_MS)
    dashboard.close()
    page.close()


def test_the_plain_page_under_jupyterlabs_server(browser, start_lab, kernel):
    lab = start_lab()
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    refused = page.goto(f"{lab.url}mlp-magic/dashboard")
    assert refused.status == 403 and "not logged in" in page.content()
    page.goto(f"{lab.url}mlp-magic/dashboard?token={lab.token}")
    shows_the_world_live(kernel, page, PANEL, "mlp-dashboard-page.png")
    looks = page.evaluate("""() => {
      const body = getComputedStyle(document.body);
      return [body.getPropertyValue('--jp-layout-color1').trim(), body.backgroundColor,
              document.querySelector('#mlp-magic-cluster').classList.contains('jp-mod-wide')];
    }""")
    assert looks == ["white", "rgb(255, 255, 255)", True], looks   # the light theme, and wide
    world = page.locator(f"{PANEL} .jp-MlpLive-world")
    world.locator("button[data-action=restart]").click()   # JupyterLab's dialog, without JupyterLab
    dialog = page.locator(".jp-Dialog-content")
    dialog.wait_for(timeout=UI_TIMEOUT_MS)
    assert dialog.evaluate("d => getComputedStyle(d).backgroundColor") == "rgb(255, 255, 255)"
    page.locator(".jp-Dialog button", has_text="Cancel").click()
    dialog.wait_for(state="detached", timeout=UI_TIMEOUT_MS)
    world.get_by_role("button", name="Copy snippet").click()
    assert world.locator(".jp-MlpLive-message").inner_text().startswith("Copied: %mpirun")
    world.get_by_role("button", name="Insert").click()   # no notebook here: said, not thrown
    assert "Copy snippet" in world.locator(".jp-MlpLive-message").inner_text()
    page.close()


class Dashboard:
    """`mlp-magic dashboard` as a user starts it; its printed line read by a thread."""

    def __init__(self, runtime: Path):
        env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(runtime))
        self.process = subprocess.Popen([sys.executable, "-m", "mlp_magic.cli", "dashboard"], env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: lines.put(self.process.stdout.readline()), daemon=True).start()
        self.url = lines.get(timeout=60).strip()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def test_mlp_magic_dashboard_serves_the_page_alone_and_leaves_nothing_behind(browser, kernel, tmp_path):
    runtime = tmp_path / "runtime"
    server = Dashboard(runtime)
    try:
        assert server.url.startswith("http://127.0.0.1:") and "/mlp-magic/dashboard?token=" in server.url
        written = runtime / f"mlp-magic-dashboard-{server.process.pid}.json"
        assert oct(written.stat().st_mode & 0o777) == "0o600"
        record = json.loads(written.read_text())
        assert record == {"url": server.url, "pid": server.process.pid, "host": "127.0.0.1",
                          "port": int(server.url.split(":")[2].split("/")[0])}
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        assert page.goto(server.url.split("?")[0]).status == 403
        token = server.url.split("token=")[1]
        assert page.goto(server.url.replace("mlp-magic/dashboard", "lab")).status == 404   # ours only
        for api in ("api/kernels", "api/contents", "api/sessions", "api/terminals"):
            assert page.goto(server.url.replace("mlp-magic/dashboard", api)).status in (403, 404), api
        assert page.goto(server.url.replace("mlp-magic/dashboard", "mlp-magic/cluster")).status == 200
        assert page.goto(server.url.split("mlp-magic")[0] + f"?token={token}").url.split("?")[0].endswith(
            "/mlp-magic/dashboard")   # the server's default URL
        page.goto(server.url)
        shows_the_world_live(kernel, page, PANEL, "mlp-dashboard-standalone.png")
        page.close()
        family = psutil.Process(server.process.pid).children(recursive=True)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(hang_bound(2)) == 0
        _, alive = psutil.wait_procs(family, timeout=5)
        assert alive == [] and not written.exists() and os.listdir(runtime) == []
    finally:
        server.close()


def no_dialog_over(page) -> None:
    """A dialog over the page (a kernel, theme or server message) fails the test with its words
    and a screenshot, rather than as a click that timed out under it."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count():
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "mlp-notebook7-dialog.png"))
        raise AssertionError(f"a dialog over the notebook: {dialog.first.inner_text()!r}")


def live_cells(seen: Path) -> list:
    """The notebook: a World, its widget, a cell with rank 1 busy until the test saw it, the stop."""
    return ["%load_ext mlp_magic", "%%mpirun -np 2\npass", "%mlp_cluster", busy_until(1, seen, 12),
            "%mpirun --stop"]


def test_notebook_7_shows_mlp_cluster_live_while_another_cell_runs(browser, notebook7):
    """%mlp_cluster's widget in Notebook 7 changes while the next cell sleeps on rank 1 (its
    kernel thread sends the ranks' states), and shows them dead after `%mpirun --stop`."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    root = notebook7.log_path.parent / "root"
    seen = root / "seen"
    cells = live_cells(seen)
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    notebook = new_notebook(cells=[new_code_cell(c) for c in cells], metadata=kernel)
    nbformat.write(notebook, str(root / "live.ipynb"))
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    page.goto(f"{notebook7.url}notebooks/live.ipynb?token={notebook7.token}")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=UI_TIMEOUT_MS)
    widget = page.locator(".widget-vbox.mlp-cluster").first
    for _ in range(10):   # a click before the kernel is connected runs nothing: again until it ran
        no_dialog_over(page)
        page.get_by_role("menuitem", name="Run").click(timeout=UI_TIMEOUT_MS)
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click(timeout=UI_TIMEOUT_MS)
        try:
            widget.wait_for(state="attached", timeout=60_000)
            break
        except Exception:
            continue
    busy = widget.locator(".mlp-rank-line", has_text="1 busy 1")
    try:
        busy.wait_for(state="attached", timeout=UI_TIMEOUT_MS)   # while cell 4 runs: no cell redraws it
        page.screenshot(path=str(ARTIFACTS / "mlp-notebook7-widget.png"))
    finally:
        seen.touch()
    widget.locator(".mlp-rank-line", has_text="2 dead 0-1").wait_for(state="attached", timeout=UI_TIMEOUT_MS)
    # The stop has ended before the server (and its kernel) go: a kernel killed in the middle of
    # `%mpirun --stop` was seen to leave the World's controller behind.
    page.get_by_text("stopped the World of 2 ranks").wait_for(state="attached", timeout=UI_TIMEOUT_MS)
    page.close()
