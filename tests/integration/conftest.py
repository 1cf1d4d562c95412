"""A real IPython shell with mlp_magic loaded, shared by the integration tests.

The World it starts (real mpiexec, real ipyparallel engines) is reused across tests, as a
user's notebook would, and stopped at the end of the session.
"""
import os

import psutil
import pytest
from IPython.testing.globalipapp import start_ipython


@pytest.fixture(scope="session")
def ip():
    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    yield shell
    shell.run_line_magic("mpirun", "--stop")


def child_pids() -> set:
    return {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}


def run(ip, cell: str):
    """Run a cell; return (stdout text, the exception raised in the cell or None)."""
    result = ip.run_cell(cell)
    return result.error_in_exec
