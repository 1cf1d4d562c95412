"""Output written below Python (a child process, C code writing to fd 1) reaches the cell's result
in engines started under pytest too: ipykernel watches fd 1/2 only where PYTEST_CURRENT_TEST is
unset, and an engine is an engine wherever it was started (issue 24: tests you can trust)."""
import os

import pytest

from tests.integration.conftest import run

pytestmark = pytest.mark.timeout(120)


def test_engines_started_from_a_test_still_watch_fd_output(ip):
    assert "PYTEST_CURRENT_TEST" in os.environ   # what the engines inherit
    cell = ("%%mpirun -np 2 -o fd\nimport os, sys\nos.system('echo from a child')\n"
            "os.write(1, b'from C\\n')\nos.write(2, b'to stderr from C\\n')")
    assert run(ip, cell) is None
    assert [r.stdout for r in ip.user_ns["fd"]] == ["from a child\nfrom C\n"] * 2
    assert [r.stderr for r in ip.user_ns["fd"]] == ["to stderr from C\n"] * 2
