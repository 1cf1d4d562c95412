"""When a process started, and which signals it catches, from what /proc shows of it (pure: the
callers read the files).

A pid names a process only while it lives; the kernel gives the number to another one later.
Its start time tells the two apart: ``/proc/PID/stat``'s 22nd field (clock ticks after boot)
plus the boot time (``/proc/stat``'s ``btime``), the value ``psutil.Process.create_time()``
gives. The rank that starts a host's agent reports its own (``agent/rank/start``), and the
agent checks it again before it signals that pid (``agent/actions``): one computation, here.
Whether a process still lives is ``lives``: a zombie (exited, its parent has not reaped it yet:
a SIGKILLed kernel under a frontend that waits later) has ended, though its pid is still taken.
"""
from __future__ import annotations

from mlp_magic.core.numbers import number

# Linux's ceiling for /proc/sys/kernel/pid_max (PID_MAX_LIMIT on 64-bit kernels).
PID_MAX_LIMIT = 4 * 1024 * 1024
# Two reads of one process's start time agree exactly; a reused pid started at another tick.
SAME_START_S = 0.01
# States of a process that has ended: a zombie (Z) and a dead one being released (X).
ENDED_STATES = "ZX"


def process_id(value) -> int | None:
    """A pid read from a record or a message, or None where it names no process we may signal:
    not an int (a bool, a float, a string), or out of 2..PID_MAX_LIMIT. 0 and -1 would signal a
    whole process group or every process, 1 is init, and a number past a C int makes os.kill
    raise OverflowError instead of answering."""
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= PID_MAX_LIMIT:
        return None
    return value


def start_time(value) -> float | None:
    """A process start time (epoch seconds) read from a record or a message, or None: a finite
    number of seconds after 1970 (json reads Infinity and NaN, and NaN equals nothing)."""
    value = number(value)
    return float(value) if value is not None and value >= 0 else None


def parse_stat(data: bytes) -> tuple | None:
    """(state letter, start time in clock ticks after boot) of a ``/proc/PID/stat`` text, or
    None when it cannot be read as one. The command name may hold spaces and parentheses: the
    fields after it are found from its last ")"."""
    end = data.rfind(b")")
    fields = data[end + 2:].split() if end >= 0 else []
    if len(fields) < 20 or not fields[19].isdigit():
        return None
    return fields[0].decode("ascii", "replace"), int(fields[19])


def groups_of(data: bytes) -> tuple | None:
    """(process group, session) in a ``/proc/PID/stat`` text (its 5th and 6th fields), or None."""
    end = data.rfind(b")")
    fields = data[end + 2:].split() if end >= 0 else []
    if len(fields) > 3 and fields[2].isdigit() and fields[3].isdigit():
        return int(fields[2]), int(fields[3])
    return None


def parse_boot_time(data: bytes) -> float | None:
    """The boot time (epoch seconds) in a ``/proc/stat`` text, or None."""
    for line in data.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == b"btime" and words[1].isdigit():
            return float(words[1])
    return None


def create_time(stat: bytes, proc_stat: bytes, ticks_per_second: int) -> float | None:
    """The epoch time the process of ``stat`` started (None when either text is unreadable)."""
    parsed, booted = parse_stat(stat), parse_boot_time(proc_stat)
    if parsed is None or booted is None or ticks_per_second <= 0:
        return None
    return booted + parsed[1] / ticks_per_second


def lives(stat: bytes, proc_stat: bytes, ticks_per_second: int, known: float | None) -> bool:
    """Whether the process of a ``/proc/PID/stat`` text has not ended (not a zombie) and, where its
    start time ``known`` is given, is that process and not another that got its pid since."""
    parsed = parse_stat(stat)
    if parsed is None or parsed[0] in ENDED_STATES:
        return False
    if known is None:
        return True
    started = create_time(stat, proc_stat, ticks_per_second)
    return started is not None and abs(started - known) < SAME_START_S


def catches(status_text: str, signum: int) -> bool:
    """Whether a process catches ``signum``, from its ``/proc/<pid>/status`` (``SigCgt:``, a hex
    mask, bit ``signum - 1``). One that does not would die of a real-time signal (its default
    action): the unblock and collectives signals go only to processes that catch them."""
    for line in status_text.splitlines():
        if line.startswith("SigCgt:"):
            try:
                return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
            except (IndexError, ValueError):
                return False
    return False
