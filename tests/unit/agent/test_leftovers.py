"""agent/leftovers: what a rank left in its group is found and stopped, a SIGTERM-deaf child
included, and nothing of another group is touched (real processes, this machine's /proc)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from mlp_magic.agent.leftovers import GROUP, SESSION, end_groups, members, own_groups
from mlp_magic.core.proc_stat import groups_of

# A "rank": the leader of a session of its own, which forks a child deaf to SIGTERM (as an
# engine's fork inherits its handlers), reports both pids and exits, as a stopped rank does.
RANK = r"""
import os, signal, sys, time
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(120)
    os._exit(0)
print(os.getpid(), child, flush=True)
if sys.argv[1] == "exit":
    os._exit(0)
time.sleep(120)
"""


def start_rank(how: str = "exit") -> tuple:
    """(the rank's identity as engine/identity reports it, the pid of the child it forked)."""
    process = subprocess.Popen([sys.executable, "-c", RANK, how], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    pid, child = (int(word) for word in process.stdout.readline().split())
    rank = {"pid": pid, "pgid": pid, "sid": pid, "create_time": psutil.Process(pid).create_time()}
    if how == "exit":
        process.wait(10)
    return rank, child, process


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_group_fields_of_a_stat_line():
    with open(f"/proc/{os.getpid()}/stat", "rb") as handle:
        assert groups_of(handle.read()) == (os.getpgrp(), os.getsid(0))
    assert groups_of(b"12 (a) b) S 1 12 34 0") == (12, 34) and groups_of(b"garbage") is None


def test_a_forked_child_of_an_ended_rank_is_stopped_though_deaf_to_sigterm():
    rank, child, _ = start_rank("exit")
    try:
        assert alive(child) and psutil.Process(child).ppid() != rank["pid"]   # init's now
        assert own_groups([rank]) == {(GROUP, rank["pid"])}
        assert members({(GROUP, rank["pid"])}) == [child]
        started = time.monotonic()
        assert end_groups(own_groups([rank]), grace=0.5) == [child]
        assert not alive(child) and time.monotonic() - started < 10
    finally:
        if alive(child):
            os.kill(child, 9)


def test_a_live_rank_and_its_children_go_too_when_the_world_stops():
    rank, child, process = start_rank("stay")
    try:
        assert sorted(end_groups(own_groups([rank]), grace=0.5)) == sorted([rank["pid"], child])
        process.wait(10)
        assert not alive(child)
    finally:
        for pid in (rank["pid"], child):
            if alive(pid):
                os.kill(pid, 9)


def test_other_sessions_and_reused_numbers_are_left_alone():
    rank, child, _ = start_rank("exit")
    try:
        # the leader of neither its group nor its session (its launcher's): nothing there is its own
        assert own_groups([dict(rank, pgid=os.getpgrp(), sid=os.getsid(0))]) == set()
        # the leader of its session only (a plain engine started with setsid, then grouped)
        assert own_groups([dict(rank, pgid=os.getpgrp())]) == {(SESSION, rank["pid"])}
        # a leader gone: its members hold its number, whatever time it was recorded with
        assert own_groups([dict(rank, create_time=rank["create_time"] - 100)]) == {(GROUP, rank["pid"])}
        # a leader alive with another start time: the number was given anew, not the rank's group
        me = {"pid": os.getpid(), "pgid": os.getpid(), "create_time": psutil.Process().create_time() - 5}
        assert own_groups([me]) == set()
        assert os.getpid() not in members({(SESSION, os.getsid(0))}, frozenset({os.getpid()}))
        assert alive(child)
    finally:
        os.kill(child, 9)
