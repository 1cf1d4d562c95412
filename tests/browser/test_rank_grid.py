"""The rank grid of a large World (issue 34) in a real JupyterLab and headless Chromium: the one-line
summary, stragglers outlined, hover, selection, and the last line a rank wrote, read from its log."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from live_world import UI_TIMEOUT_MS, Panel, big_world, rewrite

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _varied_world(record: dict) -> dict:
    """Most ranks busy writing output, three silent for 2 min (stragglers), a dead host, some
    paused, one starting, two idle; a cell running for 5 min. Times are the server's now."""
    from datetime import datetime, timedelta, timezone

    now = datetime.now(timezone.utc)
    at = lambda seconds: (now - timedelta(seconds=seconds)).isoformat(timespec="milliseconds")  # noqa: E731
    special = {**{r: "dead" for r in range(40, 48)}, **{r: "paused" for r in range(100, 104)},
               200: "starting", 17: "idle", 301: "idle"}
    for row in record["ranks"]:
        row["state"] = special.get(row["rank"], "busy")
        row["since"] = at(300)
        row["last_output"] = at(120 if row["rank"] in (5, 77, 400) else 2)
    record["cell"] = {"first_line": "for step in range(steps):", "started": at(301), "ranks": []}
    return record


def test_the_rank_grid_in_a_tab_outlines_stragglers_and_selects_by_drag_and_ctrl_click(
        browser, start_lab, state_dir, hostfile_64):
    """Issue 34: the grid of a varied 512-rank World in a wide main-area tab: the one-line
    summary, stragglers outlined (and named in one line), hover says why, a dragged rectangle
    and a ctrl-click select ranks for the snippet, a click on a host label clears them."""
    record_path = big_world(state_dir, 64, 8)
    rewrite(record_path, _varied_world(json.loads(record_path.read_text())))
    panel = Panel(browser, start_lab(hostfile=str(hostfile_64), probe_timeout=0.2))
    page = panel.page
    panel.locator(".jp-MlpCluster-openTab").click()
    tab = page.locator("#mlp-magic-cluster-main")
    summary = tab.locator(".jp-MlpLive-summary").first
    page.wait_for_function("s => s.textContent.startsWith('512 ranks: 497 busy')",
                           arg=summary.element_handle(timeout=UI_TIMEOUT_MS), timeout=UI_TIMEOUT_MS)
    line = summary.inner_text()
    assert re.fullmatch(r'512 ranks: 497 busy 5m\d\d · 8 dead \(40-47\) · 4 paused \(100-103\) · '
                        r'2 idle \(17, 301\) · 1 starting \(200\) · '
                        r'cell "for step in range\(steps\):" 5m\d\d', line), line
    assert tab.locator(".jp-MlpLive-cell").is_hidden()   # in the summary
    assert tab.locator(".jp-MlpLive-stragglers").inner_text() == "3 stragglers outlined: ranks 5,77,400"
    outlined = tab.locator(".jp-MlpLive-gridCell.jp-mod-straggler").evaluate_all(
        "cs => cs.map(c => c.dataset.rank)")
    assert sorted(outlined, key=int) == ["5", "77", "400"]
    area = tab.locator(".jp-MlpLive-gridArea").bounding_box()
    print(f"\nthe grid in a 1400 x 900 tab: {area}")
    assert area["height"] <= 640 and area["y"] + area["height"] <= 900   # beside the World's text

    tab.locator('.jp-MlpLive-gridCell[data-rank="77"]').hover()
    tip = tab.locator(".jp-MlpLive-gridTip")
    tip.wait_for(state="visible", timeout=5000)
    assert "straggler: silent 2 min" in tip.inner_text(), tip.inner_text()

    first = tab.locator('.jp-MlpLive-gridCell[data-rank="9"]').bounding_box()
    last = tab.locator('.jp-MlpLive-gridCell[data-rank="26"]').bounding_box()
    page.mouse.move(first["x"] + 2, first["y"] + 2)
    page.mouse.down()
    page.mouse.move(last["x"] + 2, last["y"] + 2, steps=5)
    page.mouse.up()
    tab.locator('.jp-MlpLive-gridCell[data-rank="301"]').click(modifiers=["Control"])
    snippet = tab.locator(".jp-MlpLive-snippetText")
    page.wait_for_function("s => s.textContent === '%mpirun --ranks 9-10,17-18,25-26,301 --where'",
                           arg=snippet.element_handle(), timeout=5000)
    page.screenshot(path=str(ARTIFACTS / "mlp-live-panel-grid-tab.png"))
    tab.locator(".jp-MlpLive-gridHost").first.click()   # empty space: no rank there
    page.wait_for_function("s => s.textContent === '%mpirun --ranks 5,77,400 --where'",
                           arg=snippet.element_handle(), timeout=5000)   # the stragglers again
    page.close()


def test_hovering_a_cell_shows_the_last_line_its_rank_wrote(browser, start_lab, state_dir, tmp_path):
    """The documents say when a rank last wrote; the line itself is read from its log (the Tail
    route) when its cell is hovered, once per output: a World of 4 x 8 ranks on this machine."""
    record_path = big_world(state_dir, 4, 8)
    record = json.loads(record_path.read_text())
    logs = tmp_path / "cell-logs"
    logs.mkdir()
    (logs / "rank3.stdout").write_text("step 1 loss 0.50\nstep 2 loss 0.4172 on rank 3\n\n")
    (logs / "rank5.stderr").write_text("warning: rank 5 is slow\n")
    for row in record["ranks"]:
        row["host"] = "localhost"   # this machine: the log is read here, not through an agent
    _varied_times(record)
    record["log_dir"] = str(logs)
    rewrite(record_path, record)
    panel = Panel(browser, start_lab())
    tip = panel.locator(".jp-MlpLive-gridTip")
    for rank, line in ((3, "step 2 loss 0.4172 on rank 3"), (5, "warning: rank 5 is slow")):
        panel.locator(f'.jp-MlpLive-gridCell[data-rank="{rank}"]').hover()
        panel.page.wait_for_function("([t, line]) => t.textContent.includes(line)",
                                     arg=[tip.element_handle(timeout=UI_TIMEOUT_MS), line], timeout=10_000)
        said = tip.text_content().splitlines()
        assert re.fullmatch(r"last output \d+ s ago", said[2]) and said[3] == f"  {line}", said
    panel.locator('.jp-MlpLive-gridCell[data-rank="9"]').hover()   # wrote nothing it kept
    panel.page.wait_for_function("t => t.dataset.rank === '9'", arg=tip.element_handle(), timeout=5000)
    panel.page.wait_for_timeout(500)   # its logs read, and found empty
    assert not [line for line in tip.text_content().splitlines() if line.startswith("  ")], tip.text_content()
    panel.page.close()


def _varied_times(record: dict) -> None:
    from datetime import datetime, timedelta, timezone

    now = datetime.now(timezone.utc)
    for row in record["ranks"]:
        row["state"] = "busy"
        row["since"] = (now - timedelta(seconds=30)).isoformat(timespec="milliseconds")
        row["last_output"] = (now - timedelta(seconds=2)).isoformat(timespec="milliseconds")
