"""What the server's actions and the reaper read from a World's published record: the ranks and
processes it names, whatever a stale or hand-edited file holds instead."""
from __future__ import annotations

import json
import math
import os
import socket
import subprocess

import psutil
import pytest
from hypothesis import given, strategies as st

from mlp_magic.world import processes, published
from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import dumps, hostile

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=10)


def test_a_well_formed_record():
    record = {"processes": [{"pid": 10, "create_time": 1.5}, {"pid": 11, "create_time": 2.5}],
              "private": {"ranks": {"0": [20, 3.5], "1": [21, 4.5, "extra"]}, "agent_key": "k"}}
    assert published.recorded_processes(record) == [(10, 1.5), (11, 2.5)]
    assert published.recorded_ranks(record) == {0: (20, 3.5), 1: (21, 4.5)}
    assert published.private_part(record)["agent_key"] == "k"


@pytest.mark.parametrize("record", [
    {}, {"private": None}, {"private": [1, 2]}, {"private": {"ranks": [[1, 2]]}},
    {"private": {"ranks": {"x": [1, 2], "-1": [1, 2], "0": None, "1": [5], "2": "7 8"}}},
    {"processes": "12"}, {"processes": [None, 3, "x"]},
])
def test_a_malformed_record_names_nothing(record):
    assert published.recorded_ranks(record) == {} and published.recorded_processes(record) == []


@given(st.dictionaries(st.sampled_from(["private", "processes", "ranks"]), JSON))
def test_no_record_makes_the_readers_raise(record):
    published.recorded_ranks(record)
    published.recorded_processes(record)
    assert isinstance(published.private_part(record), dict)


def test_stop_recorded_stops_only_what_matches_pid_and_start_time():
    mine, reused = (subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2))
    try:
        started = {p.pid: psutil.Process(p.pid).create_time() for p in (mine, reused)}
        record = {"processes": [{"pid": "not a pid"}, {"pid": 1, "create_time": None}],
                  "private": {"ranks": {"0": [mine.pid, started[mine.pid]],
                                        "1": [reused.pid, started[reused.pid] - 5.0]}}}
        assert processes.stop_recorded(record) == 1
        assert mine.wait(10) is not None and reused.poll() is None
    finally:
        for child in (mine, reused):
            child.kill()
            child.wait()


# ---------------------------------------------------------------- hostile records, read back
@pytest.fixture(scope="module")
def children():
    """Two real processes in sessions of their own, as a World's controller and rank stand."""
    started = [subprocess.Popen(["sleep", "120"], start_new_session=True) for _ in range(2)]
    yield {p.pid: psutil.Process(p.pid).create_time() for p in started}
    for child in started:
        child.kill()
        child.wait()


def naming(children: dict) -> dict:
    """A record of this process (its kernel, alive) that names the two children."""
    (own, own_start), (rank, rank_start) = children.items()
    row = {"rank": 0, "host": socket.gethostname(), "state": "busy", "since": None, "last_output": None,
           "engine_id": 0}
    return {"id": "w-1", "pid": os.getpid(), "host": socket.gethostname(), "state": "running", "np": 1,
            "ranks": [row], "processes": [{"pid": own, "create_time": own_start}],
            "agents": {socket.gethostname(): {"addr": "127.0.0.1", "port": 40000, "pid": own}},
            "private": {"ranks": {"0": [rank, rank_start]}, "groups": {"0": [rank, rank]}, "agent_key": "k",
                        "keeper": None},
            "kept": False, "log_dir": None}


@FUZZ
@given(data=st.data())
def test_no_record_makes_a_reader_raise_or_aim_beyond_the_worlds_processes(children, tmp_path_factory, data):
    """The server's watch, a new kernel's reaper and the keeper read these files: a pid of 2**63
    made os.kill raise OverflowError, a rank "²" int() a ValueError; a group of 1 with no start
    time named init's group for the reaper's TERM and KILL."""
    from mlp_magic.agent.leftovers import GROUP, SESSION
    from mlp_magic.cluster.live import as_seen
    from mlp_magic.panel import actions

    doc = data.draw(hostile(naming(children)))
    folder = tmp_path_factory.mktemp("worlds")
    (folder / f"{socket.gethostname()}-{os.getpid()}.json").write_text(dumps(doc))
    for seen in published.read_worlds(str(folder)) + published.orphaned_worlds(str(folder)):
        json.dumps(seen, allow_nan=False)   # as the panel's browser can parse it
        as_seen(seen)
        actions._targets(seen, actions._ranks_by_host(seen, "busy"))
    aimed = {p.pid for p in processes.trees(processes.recorded_trees(doc))}
    assert aimed <= set(children), (aimed, doc)
    groups = processes.led_groups(doc)
    assert groups <= {(kind, pid) for kind in (GROUP, SESSION) for pid in children}, (groups, doc)


def test_the_keepers_reading_of_a_damaged_keep_file(tmp_path, children):
    """A keeper that cannot read its keep file leaves, saying so, and stops nothing."""
    from mlp_magic.machine.process_alive import alive
    from mlp_magic.world.keep import keeper

    own, started = next(iter(children.items()))
    assert alive([own, started]) and alive([own, None])
    for owner in ([2**63, 1.0], [own, math.nan], [own, "1.5"], [own, 10**400], [1, None], [True, None]):
        assert not alive(owner)
    for owner in ([2**63, 1.0], [own, math.nan], [own, "1.5"], [own, 10**400], [1, None], [True, None],
                  "me", [own]):
        keep = {"owner": owner, "kept": True, "hours": 1, "record": "r.json"}
        (tmp_path / keeper.KEEP_FILE).write_text(dumps(keep))
        assert keeper.read_keep(str(tmp_path)) is None
        assert keeper.keep_watch(str(tmp_path)).endswith("does not read as a keep file (owner, record): "
                                                         "left as it is")
    for hours in (math.nan, math.inf, 10**400, -1, "24"):
        keeper.write_keep(str(tmp_path), (own, started), True, hours, "r.json")
        assert keeper.read_keep(str(tmp_path)) == {"owner": [own, started], "kept": True, "hours": 0,
                                                   "record": "r.json"}
