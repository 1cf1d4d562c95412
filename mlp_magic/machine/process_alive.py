"""Whether a process still runs, from its pid and start time: the one check of a World's kernel,
owner, keeper and processes (world/published, world/attach, world/keep/keeper, cluster/live, the
panel). It reads /proc; what the texts mean is core/proc_stat's (pure)."""
from __future__ import annotations

import os

from mlp_magic.core.proc_stat import lives, process_id, start_time


def alive(pid_and_start) -> bool:
    """Whether the process (pid, start time or None) still runs. A zombie has ended (a SIGKILLed
    kernel its frontend has not reaped yet); a reused pid is another process."""
    try:
        pid, started = pid_and_start
    except (TypeError, ValueError):
        return False
    pid, known = process_id(pid), start_time(started)
    if pid is None or (started is not None and known is None):
        return False   # names no process (a start time that is no time matches none)
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
        boot = b""
        if known is not None:
            with open("/proc/stat", "rb") as proc_stat:
                boot = proc_stat.read()
    except OSError:   # gone (or /proc hides it: not ours)
        return False
    return lives(text, boot, os.sysconf("SC_CLK_TCK"), known)
