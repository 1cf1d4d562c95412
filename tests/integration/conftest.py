"""Helpers for the integration tests; the shared ``ip`` shell is in tests/conftest.py.

The World the tests start (real mpiexec, real ipyparallel engines) is reused across tests,
as a user's notebook would, and stopped at the end of the session.
"""
import os
import re
import time
from pathlib import Path

import psutil
import pytest


def child_pids() -> set:
    return {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}


def run(ip, cell: str):
    """Run a cell; return the exception raised in it, or None. An error naming a World's logs
    keeps their tails for the test's report, shown only if the test fails (the session's home is
    removed at its end, so CI's report is the only place they survive). Not printed: a test
    reading the cell's output must see only what the user would."""
    error = ip.run_cell(cell).error_in_exec
    named = re.search(r"logs in (/\S+?);?(?:\s|$)", str(error or ""))
    if named:
        _LOG_TAILS.extend(log_tails(Path(named.group(1))))
    return error


_LOG_TAILS: list = []


def live_texts(cell) -> list:
    """The texts of the cell's streaming area while it ran: its display and updates but the last
    (the summary; the ranks' own displays follow it)."""
    shown = [m["content"] for m in cell.messages if m["msg_type"] in ("display_data", "update_display_data")]
    area = shown[0].get("transient", {}).get("display_id")
    texts = [content["data"].get("text/plain", "") for content in shown
             if content.get("transient", {}).get("display_id") == area]
    return texts[:-1]


def printed_by_rank(outputs: list, same_from: int) -> list:
    """Each rank's last printed line, split; its fields from ``same_from`` on equal on every rank
    (the replicas agree after the steps)."""
    printed = [r.stdout.strip().splitlines()[-1].split() for r in outputs]
    assert len({tuple(p[same_from:]) for p in printed}) == 1, printed
    return printed


def log_tails(folder: Path, lines: int = 15) -> list:
    tails = []
    for log in sorted(folder.glob("*.log")) if folder.is_dir() else ():
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        tails.append("\n".join([f"--- the last {len(tail)} lines of {log}", *tail]))
    return tails


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed and _LOG_TAILS:
        report.sections.append(("the World's logs named by its errors", "\n".join(_LOG_TAILS)))
    if call.when == "teardown":
        _LOG_TAILS.clear()


def timed_run(ip, cell: str):
    """Run a cell; return (the exception raised in it or None, seconds it took)."""
    import time

    started = time.monotonic()
    error = run(ip, cell)
    return error, time.monotonic() - started


def described(pids: set) -> list:
    """Each stray as a failure should name it: pid, status, parent and command line."""
    found = []
    for pid in sorted(pids):
        try:
            process = psutil.Process(pid)
            command = " ".join(process.cmdline())[:200]
            found.append(f"{pid} {process.status()} parent {process.ppid()}: {command}")
        except psutil.Error:
            found.append(f"{pid} (gone)")
    return found


def wait_for_no_strays(before: set, seconds: float = 15) -> set:
    """The processes started since ``before`` that are still there after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    return child_pids() - before


@pytest.fixture
def no_world(ip):
    """No World before the test (its processes: the set yielded); none of its own left after."""
    run(ip, "%mpirun --stop")
    before = child_pids()
    yield before
    left = wait_for_no_strays(before)
    assert left == set(), f"processes left behind: {described(left)}"


@pytest.fixture
def fresh_world(ip):
    """A healthy 4-rank World before the test; after it, nothing of ours may linger."""
    run(ip, "%mpirun --stop")
    before = child_pids()  # whatever else this test process runs is not ours to judge
    assert run(ip, "%%mpirun -np 4\npass") is None
    yield ip
    run(ip, "%mpirun --stop")
    left = wait_for_no_strays(before, 10)
    assert left == set(), f"processes left behind: {described(left)}"
