"""Helpers for the integration tests; the shared ``ip`` shell is in tests/conftest.py.

The World the tests start (real mpiexec, real ipyparallel engines) is reused across tests,
as a user's notebook would, and stopped at the end of the session.
"""
import os

import psutil


def child_pids() -> set:
    return {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}


def run(ip, cell: str):
    """Run a cell; return the exception raised in it, or None."""
    return ip.run_cell(cell).error_in_exec


def timed_run(ip, cell: str):
    """Run a cell; return (the exception raised in it or None, seconds it took)."""
    import time

    started = time.monotonic()
    error = run(ip, cell)
    return error, time.monotonic() - started
