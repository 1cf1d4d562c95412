"""This machine's processes as the tests and benchmarks look for them, read from /proc (one place).

``live_cmdline(pid)``: a process's command line, None when it is gone or a zombie (a PID 1 may
reap late). ``processes_running(command)``: the live processes whose command line is exactly
``command`` (what a test started, found again to see it end). ``new_children(before, ignore)``:
this process's live descendants not in ``before``, as (pid, command line), less those whose
command line holds ``ignore`` and their own descendants (a test bed's sshd and the session it
forks for a connection, "sshd: [rexeced]"; a stray check that a process turning zombie
mid-question cannot break)."""
from __future__ import annotations

import os


def live_cmdline(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return None
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, IndexError):
        return None


def processes_running(command: str) -> list[int]:
    return [int(entry) for entry in os.listdir("/proc")
            if entry.isdigit() and live_cmdline(int(entry)) == command]


def new_children(before: set[int], ignore: str | None = None) -> list[tuple[int, str]]:
    import psutil

    found, ignored = [], set()
    for process in psutil.Process().children(recursive=True):   # (parents before their children)
        line = live_cmdline(process.pid)
        if ignore and ((line and ignore in line) or _parent(process) in ignored):
            ignored.add(process.pid)
        elif line is not None and process.pid not in before:
            found.append((process.pid, line))
    return found


def _parent(process) -> int | None:
    import psutil

    try:
        return process.ppid()
    except psutil.Error:
        return None
