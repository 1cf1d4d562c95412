"""The doctor's health column (issue 25) in a real JupyterLab and headless Chromium: the real
`mlp-magic doctor` runs on this machine, as a user runs it in a terminal, and writes its report to
the state folder the lab server reads; the host's row shows the mark of its worst finding and
names the finding in the cell's tooltip, and a later run's verdict reaches the open panel (pushed:
no reload, no Refresh click)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from live_world import PANEL, UI_TIMEOUT_MS, Panel

from tests.timing import hang_bound, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

HOST = "localhost"
BROKEN = "mlp_broken_on_purpose"       # imports, then raises: an error finding
SLOW = "mlp_slow_on_purpose"          # its import outlives the probe's deadline: a warning finding
MARKS = {"ok": "✔", "warning": "!", "error": "✘", "unknown": "–"}   # labextension/src/view/hosttable.ts
HEALTH_CELL = f'{PANEL} tr[data-host="{HOST}"] td.jp-MlpCluster-health'
READ_CELL = "cell => [cell.className.replace(/.*jp-MlpCluster-health-/, ''), cell.textContent, cell.title]"


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    folder = tmp_path / "worlds"
    folder.mkdir()
    monkeypatch.setenv("MLP_MAGIC_STATE_DIR", str(folder))   # the doctor's and the lab server's
    return folder


@pytest.fixture
def hostfile(tmp_path):
    path = tmp_path / "hostfile"
    path.write_text(f"{HOST} slots=2\n")   # the same host for the doctor and the panel
    return path


@pytest.fixture
def broken_site(tmp_path):
    """A folder for PYTHONPATH with a package whose import fails, and one whose import is slow."""
    package = tmp_path / "site" / BROKEN
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('raise RuntimeError("broken on purpose")\n')
    slow = tmp_path / "site" / SLOW
    slow.mkdir()
    (slow / "__init__.py").write_text("import time\ntime.sleep(60)\n")
    return package.parent


def doctor(hostfile, *args, pythonpath=None) -> dict:
    """`mlp-magic doctor --json` in a process of its own: the report it printed (and saved)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "doctor", "--json", "--hostfile",
                           str(hostfile), *args], env=env, capture_output=True, text=True,
                          timeout=hang_bound(5.0) + 10)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def titles(report: dict, severity: str) -> list:
    return [f["title"] for f in report["findings"] if f["severity"] == severity and HOST in f["hosts"]]


def health_cell(panel) -> list:
    """[state, mark, tooltip] of the host's health cell, or None while it is not drawn."""
    cell = panel.page.query_selector(HEALTH_CELL)
    return None if cell is None else cell.evaluate(READ_CELL)


def shows(panel, state: str, seconds: float) -> list:
    """Wait until the cell shows ``state``; what it shows then."""
    wait_until(lambda: (health_cell(panel) or [None])[0] == state, seconds, interval=0.1)
    return health_cell(panel)


def test_the_hosts_health_cell_shows_the_doctors_worst_finding_and_follows_a_new_run(
        browser, start_lab, state_dir, hostfile, broken_site):
    report = doctor(hostfile, "--package", BROKEN, pythonpath=broken_site)
    assert titles(report, "error") == [f"import {BROKEN}"], report["findings"]
    assert report["exit_status"] == 1 and (state_dir / "doctor.json").exists()

    lab = start_lab(hostfile=str(hostfile))
    panel = Panel(browser, lab)
    panel.page.locator(HEALTH_CELL).wait_for(timeout=UI_TIMEOUT_MS)
    state, mark, tooltip = shows(panel, "error", hang_bound(2.0))
    assert (state, mark) == ("error", MARKS["error"]), (state, mark, tooltip)
    assert tooltip.startswith(f"error: import {BROKEN}") and "(doctor at " in tooltip, tooltip

    panel.page.evaluate("window.__mlpSamePage = true")   # gone if the page reloads
    # the broken one is fixed; a slow one is asked for (a package missing on every host would be
    # a note on the request, not the host's health)
    report = doctor(hostfile, "--package", SLOW, "--timeout", "8", pythonpath=broken_site)
    assert titles(report, "error") == [] and f"import {SLOW}" in titles(report, "warning"), report
    state, mark, tooltip = shows(panel, "warning", hang_bound(2.0))
    assert (state, mark) == ("warning", MARKS["warning"]), (state, mark, tooltip)
    assert tooltip.startswith("warning: ") and f"import {SLOW}" in tooltip, tooltip

    report = doctor(hostfile, "--no-import")   # nothing asked that is not there: healthy
    assert titles(report, "error") == titles(report, "warning") == [], \
        f"this machine has findings of its own, the host cannot be shown healthy: {report['findings']}"
    state, mark, tooltip = shows(panel, "ok", hang_bound(2.0))
    assert (state, mark) == ("ok", MARKS["ok"]), (state, mark, tooltip)
    assert tooltip.startswith("no finding (doctor at "), tooltip
    assert panel.page.evaluate("window.__mlpSamePage === true")
    panel.page.close()
