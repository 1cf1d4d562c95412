"""What a rank left behind on its host: every process of its own group, however it was made.

A rank leads a group of its own: Open MPI gives each rank its own process group, plain engines
are started in a session of their own. What a cell forks stays in that group when the rank exits
and init adopts it (``os.fork()`` in a cell: no longer the rank's child, its handlers inherited, so
SIGTERM may do nothing). A group's number is its leader's pid, and Linux gives that number to no
new process while any member lives; a leader found alive with another start time means the
number was given anew, and that group is not the rank's. Members are stopped by TERM, then KILL.

Used where a World stops: the kernel for the ranks on its machine (world/processes), each host's
agent for its host's ranks once they have ended (agent/__main__). Standard library only: the agent
runs it.
"""
from __future__ import annotations

import os
import signal
import time

from mlp_magic.machine.deadline import until
from mlp_magic.core.proc_stat import create_time, groups_of, parse_stat, process_id, start_time

PROC = "/proc"
GROUP, SESSION = 0, 1   # which of a process's groups a rank leads: its process group, or its session


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _start_time(pid: int) -> float | None:
    return create_time(_read(f"{PROC}/{pid}/stat"), _read(f"{PROC}/stat"), os.sysconf("SC_CLK_TCK"))


def own_groups(ranks) -> set:
    """{(GROUP or SESSION, number)} that ``ranks`` ({pid, create_time, pgid, sid}: engine/identity's)
    lead: a group led by the rank itself, its number not given to another process since."""
    found = set()
    for rank in ranks:
        # as a record or a message may hold them: 0, -1 or 1 would name groups not the rank's
        pid, started = process_id(rank.get("pid")), start_time(rank.get("create_time"))
        kind = GROUP if rank.get("pgid") == pid else SESSION if rank.get("sid") == pid else None
        if pid is None or kind is None:
            continue   # it leads neither (its launcher's group): nothing there is its own
        now = _start_time(pid)
        if now is None or (started is not None and abs(now - started) < 0.01):
            found.add((kind, pid))   # gone (its members hold the number), or still the rank
        # alive with no start time to compare: it may be any process now, and its group is left
    return found


def members(groups: set, skip: frozenset = frozenset()) -> list:
    """The pids of this user's live processes in ``groups``, but ``skip``."""
    found, uid = [], os.getuid()
    for name in os.listdir(PROC):
        if not name.isdigit() or int(name) in skip:
            continue
        try:
            if os.stat(f"{PROC}/{name}").st_uid != uid:
                continue
        except OSError:
            continue
        stat = _read(f"{PROC}/{name}/stat")
        ids = groups_of(stat)
        if ids and ((GROUP, ids[0]) in groups or (SESSION, ids[1]) in groups) \
                and (parse_stat(stat) or ("Z",))[0] not in "ZX":   # a corpse is not stopped again
            found.append(int(name))
    return found


def end_groups(groups: set, grace: float = 2.0, skip: frozenset = frozenset()) -> list:
    """TERM every member of ``groups``, KILL those left after ``grace``; the pids signalled."""
    if not groups:
        return []
    skip = skip | {os.getpid()}
    pids = members(groups, skip)
    _signal(pids, signal.SIGTERM)
    # a process's end announces nothing to a non-parent (no pidfd here: it may not be ours)
    until(lambda: not members(groups, skip), time.monotonic() + grace, longest_s=0.1)
    _signal(members(groups, skip), signal.SIGKILL)
    until(lambda: not members(groups, skip), time.monotonic() + grace, longest_s=0.1)
    return pids


def _signal(pids: list, sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
