"""The lab panel's TypeScript unit tests (labextension/test/*.ts, run by `jlpm test`) pass.

They test the panel's pure model: patches of the document, the summary line, stragglers, rank
ranges, GPU rows, throttle reasons, the heatmap, the history ring buffers, snippets and the
connection's reconnect and polling schedule. Skipped only where Node.js or jlpm is missing (as
tests/browser does); CI installs Node, so they run there.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

LABEXTENSION = Path(__file__).resolve().parents[2] / "labextension"


@pytest.fixture(scope="module")
def jlpm() -> str:
    jlpm = shutil.which("jlpm")
    if shutil.which("node") is None or jlpm is None:
        pytest.skip("Node.js or jlpm is not on PATH: the panel's TypeScript tests need both")
    if not (LABEXTENSION / "node_modules").is_dir():
        done = subprocess.run([jlpm, "install"], cwd=LABEXTENSION, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return jlpm


def test_the_panels_typescript_tests_pass(jlpm):
    done = subprocess.run([jlpm, "test"], cwd=LABEXTENSION, capture_output=True, text=True, timeout=600)
    report = done.stdout + done.stderr
    # node --test's TAP summary: "# pass N" and "# fail N"
    summary = {line.split()[1]: line.split()[2] for line in report.splitlines()
               if line.startswith(("# pass ", "# fail ")) and len(line.split()) == 3}
    assert done.returncode == 0 and summary.get("fail") == "0", report[-6000:]
    assert int(summary.get("pass", "0")) > 0, report[-3000:]
