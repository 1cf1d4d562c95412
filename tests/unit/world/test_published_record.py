"""What the server's actions and the reaper read from a World's published record: the ranks and
processes it names, whatever a stale or hand-edited file holds instead."""
from __future__ import annotations

import subprocess

import psutil
import pytest
from hypothesis import given, strategies as st

from mlp_magic.world import processes, published

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
