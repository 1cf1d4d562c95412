"""What a rank left behind on its host: every process of its session, however it was made.

A rank is the leader of a session of its own (Open MPI starts each rank with setsid, plain engines
are started so too). What a cell forks keeps that session when the rank exits and init adopts it
(``os.fork()`` in a cell: no longer the rank's child, its handlers inherited, so SIGTERM may do
nothing). A session's number is its leader's pid, and Linux does not give that number to a new
process while any member lives; a leader found alive with another start time means the number
was given anew, and that session is not the rank's. Members are stopped by TERM, then KILL.

Used where a World stops: the kernel for the ranks on its machine (world/processes), each host's
agent for its host's ranks once they have ended (agent/__main__). Standard library only: the agent
runs it.
"""
from __future__ import annotations

import os
import signal
import time

from mlp_magic.core.deadline import until
from mlp_magic.core.proc_stat import create_time, parse_stat, session_of

PROC = "/proc"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _start_time(pid: int) -> float | None:
    return create_time(_read(f"{PROC}/{pid}/stat"), _read(f"{PROC}/stat"), os.sysconf("SC_CLK_TCK"))


def own_sessions(ranks) -> set:
    """The sessions of ``ranks`` ({pid, create_time, sid}) that are theirs: led by the rank, its
    number not given to another process since."""
    sessions = set()
    for rank in ranks:
        pid, sid, started = rank.get("pid"), rank.get("sid"), rank.get("create_time")
        if not pid or sid != pid:
            continue   # not a session leader (a launcher that does not setsid): its session is not its own
        now = _start_time(pid)
        if now is None or started is None or abs(now - float(started)) < 0.01:
            sessions.add(pid)   # gone (its members hold the number), or still the rank
    return sessions


def members(sessions: set, skip: frozenset = frozenset()) -> list:
    """The pids of this user's processes in ``sessions``, but ``skip``."""
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
        if session_of(stat) in sessions and (parse_stat(stat) or ("Z",))[0] not in "ZX":   # not a corpse
            found.append(int(name))
    return found


def end_sessions(sessions: set, grace: float = 2.0, skip: frozenset = frozenset()) -> list:
    """TERM every member of ``sessions``, KILL those left after ``grace``; the pids signalled."""
    if not sessions:
        return []
    skip = skip | {os.getpid()}
    pids = members(sessions, skip)
    _signal(pids, signal.SIGTERM)
    # a process's end announces nothing to a non-parent (no pidfd here: it may not be ours)
    until(lambda: not members(sessions, skip), time.monotonic() + grace, longest_s=0.1)
    _signal(members(sessions, skip), signal.SIGKILL)
    until(lambda: not members(sessions, skip), time.monotonic() + grace, longest_s=0.1)
    return pids


def _signal(pids: list, sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
