"""The snapshot's parts without a server: assembly, the shared cache, probes, settings."""
from __future__ import annotations

import asyncio
import socket

from mlp_magic.server import MlpMagicPanel
from mlp_magic.server.reachability import Reachability, needs_probe, probe_tcp
from mlp_magic.server.snapshot import SnapshotCache, build_snapshot, engines_by_host

LOCAL = frozenset({"localhost", "127.0.0.1", "::1", "node7"})
TOPOLOGY = {"source": "hostfile h", "master_addr": "node7", "is_local": False, "total_slots": 3,
            "hosts": [{"name": "node7", "slots": 2, "index": 0, "ranks": [0, 1]},
                      {"name": "node8", "slots": 1, "index": 1, "ranks": [2]}]}
GPU = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:18:00.0",
       "memory_total_mib": 81559, "memory_used_mib": 4, "utilization_pct": 0, "numa_node": 0,
       "cpu_affinity": "0-79"}


def world(pid, ranks, **extra):
    return {"pid": pid, "np": len(ranks), "ranks": ranks, **extra}


def test_local_gpus_go_to_this_machine_under_any_of_its_names():
    reach = {"node7": Reachability(True, 0.0, None), "node8": Reachability(False, 1000.0, "no answer")}
    snapshot = build_snapshot(TOPOLOGY, reach, {"source": "nvml", "gpus": [GPU]}, [], "t", LOCAL)
    assert [h["gpus"] for h in snapshot["hosts"]] == [[GPU], []]
    assert [(h["reachable"], h["error"]) for h in snapshot["hosts"]] == [(True, None), (False, "no answer")]
    assert snapshot["gpu_source"] == "nvml" and snapshot["updated_at"] == "t"


def test_gpus_a_world_publishes_for_a_remote_host():
    published = world(5, [], gpus={"node8": {"host": "node8", "source": "nvml", "gpus": [GPU]}})
    snapshot = build_snapshot(TOPOLOGY, {}, None, [published], "t", LOCAL)
    assert [h["gpus"] for h in snapshot["hosts"]] == [[], [GPU]]
    assert [h["reachable"] for h in snapshot["hosts"]] == [None, None]  # not probed


def test_engines_are_grouped_by_host_and_ordered_by_rank():
    worlds = [world(5, [{"rank": 2, "host": "node8", "engine_id": 0, "state": "busy"},
                        {"rank": 1, "host": "localhost", "engine_id": 2, "state": "idle"},
                        {"rank": 0, "host": "node7", "engine_id": 1, "state": "idle"},
                        "not a rank"])]
    grouped = engines_by_host(worlds, LOCAL)
    assert [e["rank"] for e in grouped["<local>"]] == [0, 1]  # localhost and node7 are one host
    assert grouped["node8"] == [{"rank": 2, "engine_id": 0, "state": "busy", "world_pid": 5}]


def test_no_topology_gives_no_hosts_and_the_error():
    snapshot = build_snapshot(None, {}, None, [], "t", LOCAL, error="hostfile h line 2: bad")
    assert snapshot["hosts"] == [] and snapshot["error"] == "hostfile h line 2: bad"


def test_only_remote_names_or_explicit_ports_are_probed():
    assert not needs_probe("localhost", None, LOCAL)
    assert not needs_probe("127.0.0.5", None, LOCAL)
    assert needs_probe("127.0.0.5", 2222, LOCAL)
    assert needs_probe("node8", None, LOCAL)


async def test_probe_of_a_refusing_port():
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound, not listening: refused
        outcome = await probe_tcp("127.0.0.1", bound.getsockname()[1], timeout=1.0)
    assert outcome.reachable is False and "refused" in outcome.error


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


async def test_cache_serves_one_snapshot_until_it_expires():
    clock, calls = Clock(), []

    async def compute():
        calls.append(clock.now)
        return {"n": len(calls)}

    cache = SnapshotCache(compute, ttl=4.0, clock=clock)
    assert await cache.get() == '{"n": 1}'
    clock.now += 3.9
    assert await cache.get() == '{"n": 1}'
    clock.now += 0.2
    assert await cache.get() == '{"n": 2}'
    assert cache.computations == 2


async def test_concurrent_misses_share_one_computation_and_refresh_starts_a_new_one():
    release, calls = asyncio.Event(), []

    async def compute():
        calls.append(1)
        number = len(calls)
        await release.wait()
        return {"n": number}

    cache = SnapshotCache(compute, ttl=60.0)
    waiting = [asyncio.ensure_future(cache.get()) for _ in range(10)]
    await asyncio.sleep(0)
    cache.invalidate()  # a refresh while the first computation runs
    fresh = asyncio.ensure_future(cache.get())
    await asyncio.sleep(0)
    release.set()
    assert {await w for w in waiting} == {'{"n": 1}'}  # the ten callers shared computation 1
    assert await fresh == '{"n": 2}'
    assert len(calls) == 2
    assert await cache.get() == '{"n": 2}'  # the stale computation was not cached


async def test_a_failed_computation_is_not_cached():
    outcomes = [RuntimeError("driver gone"), {"ok": True}]

    async def compute():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    cache = SnapshotCache(compute, ttl=60.0)
    try:
        await cache.get()
    except RuntimeError as error:
        assert str(error) == "driver gone"
    else:
        raise AssertionError("the failure was swallowed")
    assert await cache.get() == '{"ok": true}'


def test_hostfile_setting_defaults_to_the_environment(monkeypatch):
    monkeypatch.setenv("MLP_MAGIC_HOSTFILE", "/etc/mlp/hostfile")
    assert MlpMagicPanel().hostfile == "/etc/mlp/hostfile"
    monkeypatch.delenv("MLP_MAGIC_HOSTFILE")
    assert MlpMagicPanel().hostfile == ""
