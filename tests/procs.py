"""This machine's processes as the tests and benchmarks look for them, read from /proc (one place).

``live_cmdline(pid)``: a process's command line, None when it is gone or a zombie (a PID 1 may
reap late). ``processes_running(command)``: the live processes whose command line is exactly
``command`` (what a test started, found again to see it end)."""
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
