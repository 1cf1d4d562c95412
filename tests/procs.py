"""This machine's processes as the tests and benchmarks look for them, read from /proc (one place).

``live_cmdline(pid)``: a process's command line, None when it is gone or a zombie (a PID 1 may
reap late). ``processes_running(command)``: the live processes whose command line is exactly
``command`` (what a test started, found again to see it end). ``new_children(before, ignore)``:
this process's live descendants not in ``before``, as (pid, command line), less those whose
command line holds ``ignore`` (a stray check that a process turning zombie mid-question cannot
break)."""
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

    found = []
    for process in psutil.Process().children(recursive=True):
        line = None if process.pid in before else live_cmdline(process.pid)
        if line is not None and not (ignore and ignore in line):
            found.append((process.pid, line))
    return found
