"""The %mlp_cluster widget rendered by JupyterLab in headless Chromium (Playwright).

Runs examples/04-cluster-view.ipynb in a real JupyterLab (engineer C's ``start_lab`` fixture),
waits for the live ipywidgets views, checks their host tables in the DOM and saves screenshots
to test-artifacts/.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
NOTEBOOK = "04-cluster-view.ipynb"
ARTIFACTS = REPO / "test-artifacts"
CPU_ONLY = not os.path.exists("/dev/nvidiactl")
UI_TIMEOUT_MS = 60_000
RUN_TIMEOUT_MS = 180_000  # the notebook starts and stops a World of 2 ranks
# The widget's root VBox (add_class("mlp-cluster")); the static HTML fallback is a plain div.
WIDGET = ".widget-vbox.mlp-cluster"


def open_notebook(browser, lab):
    root = lab.log_path.parent / "root"  # the fixture's server root_dir
    shutil.copy(EXAMPLES / NOTEBOOK, root / NOTEBOOK)
    shutil.copytree(EXAMPLES / "topo", root / "topo")
    page = browser.new_page(viewport={"width": 1900, "height": 2000})
    page.goto(f"{lab.url}lab/tree/{NOTEBOOK}?token={lab.token}")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=UI_TIMEOUT_MS)
    return page


def run_all_cells(page) -> None:
    """Run > Run All Cells, once the kernel is connected: a click before that runs nothing.

    The status bar says "| Idle" only then (the toolbar's execution indicator already says
    idle while the session is still initializing).
    """
    page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$")).wait_for(timeout=UI_TIMEOUT_MS)
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def host_table(widget) -> list:
    """The host table of one widget view, as rows of cell texts (header first)."""
    rows = widget.locator("table.mlp-cluster-hosts tr")
    return [[cell.strip() for cell in rows.nth(i).locator("th, td").all_text_contents()]
            for i in range(rows.count())]


def test_cluster_widget_renders_its_host_table(browser, start_lab, state_dir):
    """state_dir: the Worlds this notebook sees are its own (not a World another test left running)."""
    lab = start_lab()
    page = open_notebook(browser, lab)
    run_all_cells(page)
    # Cells below the fold are laid out lazily (content-visibility): wait for presence, not visibility.
    try:
        page.get_by_text("stopped the World of 2 ranks").wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    except Exception:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "cluster-widget-failure.png"))
        print(page.locator(".jp-Notebook").text_content()[-4000:], lab.log(), sep="\n----\n")
        raise

    widgets = page.locator(WIDGET)
    widgets.nth(2).wait_for(state="attached", timeout=UI_TIMEOUT_MS)
    assert widgets.count() == 3  # this machine, the saved HGX topology, the running World
    local, hgx, with_world = (widgets.nth(i) for i in range(3))

    header, row = host_table(local)
    assert header == ["host", "slots", "ranks", "reachable", "engines", "GPUs"]
    # Live: made before the World, it shows the World's engines once its slow refresh sees them
    assert row[0] == "localhost" and row[3] == "yes", row
    assert re.fullmatch(r"no engines|2 engines: .*", row[4]), row
    if CPU_ONLY:
        assert row[5] == "none"
        assert "no GPU (CPU-only host)" in local.text_content()

    assert host_table(hgx)[1:] == [["hgx0", "8", "0-7", "?", "no engines", "8 x GPU"],
                                   ["hgx1", "8", "8-15", "?", "no engines", "8 x GPU"]]
    tab_titles = [t.strip() for t in hgx.locator(".lm-TabBar-tab").all_text_contents()]
    assert tab_titles == ["hgx0", "hgx1"]
    grid = hgx.locator(".widget-gridbox.mlp-matrix").first
    assert grid.locator(".mlp-link", has_text="NV18").count() == 56
    legend = hgx.locator(".mlp-legend").first.text_content()
    assert "NVLink, # links bonded" in legend and "across the CPU socket" in legend

    assert host_table(with_world)[1][:5] == ["localhost", "2", "0-1", "yes", "2 engines: 2 idle"]
    # Live: no cell redraws the views after `%mpirun --stop`; its kernel thread sends the ranks
    # dead. The first view, made before the World, shows it too if it ticked while the World ran
    # (its thread looks once a second; the notebook may stop the World sooner): dead, or nothing.
    dead = with_world.locator(".mlp-rank-line", has_text="2 dead 0-1")
    dead.wait_for(state="attached", timeout=UI_TIMEOUT_MS)
    page.wait_for_timeout(2000)   # the first view's thread has had its last tick
    lines = [line.strip() for line in local.locator(".mlp-rank-line").all_text_contents()]
    assert all(line.endswith("2 dead 0-1") for line in lines), lines

    ARTIFACTS.mkdir(exist_ok=True)
    screenshot_from(page, local, "cluster-widget.png")
    screenshot_from(page, hgx, "cluster-widget-hgx.png")
    page.close()


def screenshot_from(page, widget, name: str) -> None:
    """The page with ``widget`` scrolled to the top of the notebook panel (a tall widget fits:
    the viewport is taller than the 8-GPU, 12-NIC view)."""
    widget.evaluate("element => element.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)  # lazily laid-out cells render after the scroll
    page.screenshot(path=str(ARTIFACTS / name))
