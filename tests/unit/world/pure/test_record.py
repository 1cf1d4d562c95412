"""A World's record as read back (world/pure/record): whatever the file holds, the readers get
the types they act on, or no record."""
from __future__ import annotations

import math

import pytest
from hypothesis import example, given

from mlp_magic.core.proc_stat import PID_MAX_LIMIT, process_id, start_time
from mlp_magic.world.pure.record import finite_json, private_part, rank_key, sane_record
from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import hostile


def row(rank: int) -> dict:
    return {"rank": rank, "host": "w1", "state": "busy", "since": "2026-11-25T10:00:00.000+00:00",
            "last_output": None, "engine_id": rank}


VALID = {
    "id": "w-1", "pid": 4321, "host": "w0", "state": "running", "started_at": "2026-11-25T09:59:00+00:00",
    "np": 2, "mpi": "openmpi", "source": "hostfile", "log_dir": "/logs/w-1", "gpus": {"w1": {"gpus": []}},
    "cell": {"first_line": "x = 1", "started_at": "2026-11-25T10:00:00+00:00", "on": "0-1"},
    "ranks": [row(0), row(1)], "processes": [{"pid": 4400, "create_time": 1764064740.25}],
    "agents": {"w1": {"addr": "10.0.0.2", "port": 40123, "pid": 5100}, "w2": {"error": "no python3"}},
    "private": {"ranks": {"0": [5200, 1764064741.5], "1": [5201, 1764064741.75]},
                "groups": {"0": [5200, 5200], "1": [5201, 5201]}, "agent_key": "k",
                "keeper": [4500, 1764064740.5], "workdir": "/tmp/w-1"},
    "kept": True, "keep_hours": 24, "idle_since": None, "updated_at": "2026-11-25T10:00:02+00:00",
}


def test_a_valid_record_reads_as_written():
    assert sane_record(VALID) == VALID
    across_hosts = dict(VALID["private"], agent_key={"key": "ab12", "cert": "-----BEGIN CERTIFICATE-----"})
    assert sane_record(dict(VALID, private=across_hosts)) == dict(VALID, private=across_hosts)
    for key in ({"key": "ab12"}, {"key": 1, "cert": "c"}, 12, [], math.inf):
        damaged = dict(VALID, private=dict(across_hosts, agent_key=key))
        assert private_part(sane_record(damaged)["private"])["agent_key"] is None


@pytest.mark.parametrize("pid", [0, -1, 1, True, 2**31, 2**63, 10**40, 4.0, math.inf, math.nan, "4321", None])
def test_a_kernel_pid_that_names_no_process_is_no_record(pid):
    assert sane_record(dict(VALID, pid=pid)) is None


def test_what_is_malformed_is_left_out_and_the_rest_kept():
    raw = dict(VALID, ranks=[row(0), {"rank": "1", "host": "w1"}, {"rank": 2}, {"rank": -1, "host": "w1"},
                             {"rank": 3, "host": "w1", "state": 7, "since": 1e999,
                              "engine_id": True}],
               processes=[{"pid": 2**63, "create_time": 1.0}, {"pid": 4400, "create_time": math.nan}],
               agents={"w1": {"addr": "10.0.0.2", "port": 70000, "pid": 5100}, "w2": "up"},
               keep_hours=math.inf,
               private=dict(VALID["private"], ranks={"²": [5200, 1.5], "0": [0, 1.5], "1": [5201, 1.5]},
                            groups={"0": [1, 1], "1": [5201, 5201]}, keeper=[-1, 2.0]))
    seen = sane_record(raw)
    assert [r["rank"] for r in seen["ranks"]] == [0, 3]
    assert seen["ranks"][1] == {"rank": 3, "host": "w1", "state": "unknown", "since": None,
                                "last_output": None, "engine_id": None}
    assert seen["processes"] == [{"pid": 4400, "create_time": None}]   # its start unknown: matches none
    assert seen["agents"] == {}
    assert seen["keep_hours"] is None
    private = private_part(seen["private"])
    assert private["ranks"] == {"1": [5201, 1.5]}
    assert private["groups"] == {"1": [5201, 5201]}
    assert private["keeper"] is None


@pytest.mark.parametrize("key, rank", [("12", 12), ("0", 0), ("²", None), ("٣", None), ("-1", None),
                                       (" 1", None), ("1e3", None), ("", None), (3, None)])
def test_a_rank_as_a_key_is_ascii_digits(key, rank):
    assert rank_key(key) == rank


def test_a_pid_and_a_start_time_as_records_hold_them():
    assert [process_id(v) for v in (2, PID_MAX_LIMIT, PID_MAX_LIMIT + 1, 1, 0, -5, True, 2.0)] == \
        [2, PID_MAX_LIMIT, None, None, None, None, None, None]
    assert [start_time(v) for v in (0, 1.5, 17, -1.0, math.inf, math.nan, True, "1.5", None)] == \
        [0.0, 1.5, 17.0, None, None, None, None, None, None]


def _checked(seen: dict) -> None:
    """What every reader relies on."""
    assert process_id(seen["pid"]) == seen["pid"] and isinstance(seen.get("host", ""), str)
    for rank in seen["ranks"]:
        assert isinstance(rank["rank"], int) and rank["rank"] >= 0 and not isinstance(rank["rank"], bool)
        assert isinstance(rank["host"], str) and isinstance(rank["state"], str)
        assert all(rank.get(key) is None or isinstance(rank[key], str) for key in ("since", "last_output"))
        assert rank.get("engine_id") is None or type(rank["engine_id"]) is int
    for entry in seen["processes"]:
        assert process_id(entry["pid"]) and entry["create_time"] in (None, start_time(entry["create_time"]))
    private = private_part(seen.get("private"))   # checked where it is used
    for key, (pid, started) in private.get("ranks", {}).items():
        assert rank_key(key) is not None and process_id(pid) and started in (None, start_time(started))
    for key, ids in private.get("groups", {}).items():
        assert rank_key(key) is not None and all(process_id(i) for i in ids)
    key = private.get("agent_key")
    assert key is None or isinstance(key, str) or all(isinstance(key[part], str) for part in ("key", "cert"))
    for agent in seen["agents"].values():
        assert "error" in agent or 0 < agent["port"] < 65536
        assert "error" in agent or agent["pid"] in (None, process_id(agent["pid"]))


@FUZZ
@given(hostile(VALID))
@example(dict(VALID, pid=2**63))
@example(dict(VALID, private=dict(VALID["private"], groups={"²": [5200, 5200]})))
def test_any_record_reads_as_one_readers_can_trust_or_as_none(raw):
    seen = sane_record(raw)
    if seen is not None:
        _checked(seen)
        assert sane_record(seen) == seen   # read again, nothing changes


def test_numbers_that_are_not_finite_read_as_null():
    assert finite_json('{"a": [Infinity, -Infinity, NaN, 1e999, -1e999, 1.5, 10, 1e308]}') == \
        {"a": [None, None, None, None, None, 1.5, 10, 1e308]}
