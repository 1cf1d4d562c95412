"""The GPU heatmap (issue 34) in a real JupyterLab and headless Chromium: 64 real GPU agents
replaying a real 8x H100 capture, 512 ranks flipping state, in the sidebar and in a wide tab."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from live_world import LONGTASKS, MEASURED, PANEL, RESET, UI_TIMEOUT_MS, Panel, flipping_windows

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _live_load():
    """benchmarks/live_load.py: the 64 agents on a real 8x H100 capture, and their World."""
    path = ARTIFACTS.parent / "benchmarks" / "live_load.py"
    spec = importlib.util.spec_from_file_location("live_load", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


PAINTED = "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; " \
          "let n = 0; for (let i = 3; i < d.length; i += 4) n += d[i] > 0; return n; }"


@pytest.fixture
def agents_64(state_dir, tmp_path, monkeypatch, hostfile_64):
    load = _live_load()
    key = "ab" * 32
    monkeypatch.setenv("MLP_MAGIC_NVML_REPLAY", "")   # start_agents sets it: put back after
    agents = load.start_agents(64, key, load.eight_gpu_table(tmp_path), tmp_path / "logs")
    try:
        hosts = [f"127.0.1.{i + 1}" for i in range(64)]
        load.write_world(state_dir, hosts, agents, key, 8)
        yield hostfile_64, state_dir / "bench-1-1.json"
    finally:
        for process, _ in agents:
            process.kill()
            process.wait()


def test_64_hosts_of_8_gpus_and_512_ranks_render_as_a_heatmap_within_the_long_task_budget(
        browser, start_lab, agents_64):
    hostfile, record_path = agents_64
    lab = start_lab(hostfile=str(hostfile), probe_timeout=0.2)
    page = Panel(browser, lab, init_script=LONGTASKS).page
    heatmap = page.locator(f"{PANEL} canvas.jp-MlpLive-heatmap")
    heatmap.wait_for(timeout=UI_TIMEOUT_MS)
    assert page.locator(f"{PANEL} .jp-MlpLive-summary").first.inner_text().startswith("512 ranks")
    page.wait_for_timeout(3000)   # the GPUs' samples and history in
    heatmap.scroll_into_view_if_needed()
    assert heatmap.evaluate(PAINTED) > 0   # the 64 x 8 cells are drawn
    # the ranks change state every 0.25 s while the GPUs tick at 1 Hz
    windows = flipping_windows(page, record_path, json.loads(record_path.read_text()))
    print("\n512 ranks, 512 GPUs, 6 s of live changes: tasks over 50 ms and longest gap between "
          f"frames (ms), each window: {[w[:2] for w in windows]}")
    assert windows[-1][0] == [], windows
    _heatmap_reads_in_the_sidebar(page, heatmap)
    page.close()


# The heatmap's axes: [row labels], [column labels], the caption, the grid's box, and whether the
# GPU section fits its width (no horizontal scrolling).
HEAT_AXES = """s => {
  const texts = sel => [...s.querySelectorAll(sel)].map(n => n.textContent);
  const grid = s.querySelector('.jp-MlpLive-heatGrid').getBoundingClientRect();
  const right = s.getBoundingClientRect().right;
  const fits = s.scrollWidth <= s.clientWidth && grid.right <= right + 0.5 ||
    [s.scrollWidth, s.clientWidth, grid.right, right];
  return [texts('.jp-MlpLive-heatRowLabel'), texts('.jp-MlpLive-heatColLabel'),
          s.querySelector('.jp-MlpLive-heatmapCaption').textContent,
          [Math.round(grid.width), Math.round(grid.height)], fits];
}"""


def _heatmap_reads_in_the_sidebar(page, heatmap) -> None:
    """Issue 34: hosts labelled at the left (every 2nd of 64; hover names each), GPUs 0-7 on top,
    10 px rows that fit the sidebar; a legend with the metric's range and unit, which the metric
    selector changes; hover names the host and GPU with every metric; click shows the host's rows."""
    page.evaluate(RESET)
    section = page.locator(f"{PANEL} .jp-MlpLive-gpuSection")
    rows, columns, caption, area, fits = section.evaluate(HEAT_AXES)
    assert rows == [str(i + 1) for i in range(0, 64, 2)], rows   # 127.0.1.1, .3, ... less 127.0.1.
    assert columns == [str(i) for i in range(8)], columns
    assert caption.startswith("rows: 64 hosts 127.0.1.* (every 2nd labelled"), caption
    assert area[1] <= 700 and fits is True, (area, fits)
    legend = page.locator(f"{PANEL} .jp-MlpLive-heatLegend")
    assert legend.get_attribute("data-unit") == "%", legend.inner_text()
    # A loaded 2-core machine stalls the page now and then (one 51 ms task seen in CI): the
    # interaction is measured up to 3 times and one clean try must be among them, as for the
    # flipping windows; a slow repaint is slow every time.
    tries = []
    for _ in range(3):
        page.evaluate(RESET)
        _switch_metrics_hover_and_pick(page, heatmap, legend, first=not tries)
        tries.append(page.evaluate(MEASURED))
        if not tries[-1][0]:
            break
        heatmap.click(position=_gpu5_of_third_host(heatmap))   # unpicked, for the next try
        page.locator(f'{PANEL} .jp-MlpLive-gpus[data-host="127.0.1.3"]').wait_for(
            state="hidden", timeout=5000)
    print(f"4 metrics, a hover and a click, each try: tasks over 50 ms and longest gap between "
          f"frames (ms): {tries}")
    assert tries[-1][0] == [], tries


def _gpu5_of_third_host(heatmap) -> dict:
    box = heatmap.bounding_box()
    w, h = box["width"] / 8, box["height"] / 64
    return {"x": 5 * w + w / 2, "y": 2 * h + h / 2}   # 127.0.1.3's GPU5


def _switch_metrics_hover_and_pick(page, heatmap, legend, first: bool) -> None:
    units = (("temperature", "°C"), ("power", "W (power limit)"), ("memory", "GiB"), ("util", "%"))
    for metric, unit in units:
        page.locator(f"{PANEL} select.jp-MlpLive-metric").select_option(metric)
        page.wait_for_function("([l, u]) => l.dataset.unit === u", arg=[legend.element_handle(), unit],
                               timeout=5000)
        assert unit in legend.inner_text(), (unit, legend.inner_text())
    said = legend.inner_text()
    legend_words = ("utilisation:", "0", "100", "no value", "clocks slowed", "XID error",
                    "uncorrected ECC errors")
    for words in legend_words:
        assert words in said, (words, said)
    if first:
        page.screenshot(path=str(ARTIFACTS / "mlp-live-panel-heatmap.png"))
    heatmap.hover(position=_gpu5_of_third_host(heatmap))
    card = page.locator(f"{PANEL} .jp-MlpLive-heatCard")
    card.wait_for(state="visible", timeout=5000)
    said = card.inner_text()
    assert said.startswith("127.0.1.3 · GPU5"), said
    for metric in ("utilisation", "memory", "temperature", "power", "GiB", "°C", " W"):
        assert metric in said, (metric, said)
    assert card.locator("canvas").count() == 8   # the host's GPUs' sparklines
    if first:
        page.screenshot(path=str(ARTIFACTS / "mlp-live-panel-heatmap-hover.png"))
    heatmap.click(position=_gpu5_of_third_host(heatmap))
    page.locator(f'{PANEL} .jp-MlpLive-gpus[data-host="127.0.1.3"]').wait_for(timeout=5000)


def test_the_heatmap_in_a_wide_tab_fits_a_1400_x_900_screen_beside_the_rank_grid(
        browser, start_lab, agents_64):
    """Issue 34: in a main-area tab (1400 x 900) the heatmap of 64 hosts x 8 GPUs, its axes and
    its legend are all on screen beside the rank grid and the summary, without scrolling; hover
    names a host and GPU there too."""
    hostfile, _ = agents_64
    panel = Panel(browser, start_lab(hostfile=str(hostfile), probe_timeout=0.2))
    page = panel.page
    panel.locator(".jp-MlpCluster-openTab").click()
    tab = page.locator("#mlp-magic-cluster-main")
    heatmap = tab.locator("canvas.jp-MlpLive-heatmap")
    heatmap.wait_for(timeout=UI_TIMEOUT_MS)
    page.wait_for_timeout(3000)   # the GPUs' samples in
    boxes = {}
    for name, selector in (("summary", ".jp-MlpLive-summary"), ("ranks", ".jp-MlpLive-gridArea"),
                           ("heatmap", ".jp-MlpLive-heatGrid"), ("legend", ".jp-MlpLive-heatLegend")):
        boxes[name] = tab.locator(selector).first.bounding_box()
    print(f"\nthe heatmap in a 1400 x 900 tab: {boxes}")
    for name, box in boxes.items():
        inside = box and box["y"] >= 0 and box["y"] + box["height"] <= 900 and box["x"] + box["width"] <= 1400
        assert inside, (name, boxes)
    assert boxes["heatmap"]["x"] >= boxes["ranks"]["x"] + boxes["ranks"]["width"], boxes   # beside, not below
    box = heatmap.bounding_box()
    # 127.0.1.64's GPU0: the first column of the last row
    heatmap.hover(position={"x": box["width"] / 16, "y": box["height"] - box["height"] / 128})
    card = tab.locator(".jp-MlpLive-heatCard")
    card.wait_for(state="visible", timeout=5000)
    assert card.inner_text().startswith("127.0.1.64 · GPU0"), card.inner_text()
    card_box = card.bounding_box()
    assert card_box["y"] >= 0 and card_box["y"] + card_box["height"] <= 900, card_box   # above the cursor
    page.screenshot(path=str(ARTIFACTS / "mlp-live-panel-heatmap-tab.png"))
    page.close()
