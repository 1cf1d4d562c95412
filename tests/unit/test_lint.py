"""The tree stays flake8-clean under setup.cfg's settings."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_flake8_clean():
    if shutil.which("flake8") is None and subprocess.run([sys.executable, "-m", "flake8", "--version"],
                                                         capture_output=True).returncode != 0:
        pytest.skip("flake8 is not installed (it comes with the test extra)")
    done = subprocess.run([sys.executable, "-m", "flake8", "mlp_magic", "tests", "benchmarks", "scripts"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
