"""The cluster's one model, built from values only."""
from __future__ import annotations

import json

from hypothesis import example, given

from mlp_magic.cluster.html import state_html
from mlp_magic.cluster.pure.model import cluster_state, published_inventories
from mlp_magic.cluster.text import state_text
from mlp_magic.machine.topology import topology_from_environment
from tests.unit.cluster.states import h200, two_host_state
from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import dumps, hostile, replaced


def test_state_of_two_hosts():
    state = two_host_state()
    assert (state.source, state.total_slots, state.master_addr) == ("-H worker0:8,worker1:8", 16, "worker0")
    worker0, worker1 = state.hosts
    assert (worker0.name, worker0.slots, worker0.ranks, worker0.reachable) == (
        "worker0", 8, list(range(8)), True)
    assert worker0.engine_summary == "8 engines: 1 busy, 7 idle"
    assert worker0.gpus.links["GPU0"]["mlx5_0"] == "PXB"
    assert worker0.hints == ["worker0: ranks 0-7 span NUMA nodes 0,1 (node 0: ranks 0-3; node 1: ranks 4-7); "
                             "pin each rank to its GPU's CPUs (cpu_affinity) or memory and PCIe traffic "
                             "cross the socket"]
    assert (worker1.ranks, worker1.reachable, worker1.reach_error) == (
        list(range(8, 16)), False, "port 22: connection refused")
    assert worker1.engine_summary == "no engines" and worker1.gpus.gpus == []


def test_local_names_are_one_host():
    topology = topology_from_environment({}, hosts="127.0.0.1:2")
    worlds = [{"pid": 1, "ranks": [{"rank": 0, "host": "myhost", "engine_id": 0, "state": "idle"}]}]
    state = cluster_state(topology, [h200("localhost")], worlds, {},
                          local_names=["localhost", "127.0.0.1", "myhost"])
    [host] = state.hosts
    assert host.gpus is not None and len(host.gpus.gpus) == 8
    assert host.engine_summary == "1 engine: 1 idle" and host.reachable is None


def test_unprobed_host():
    state = cluster_state(topology_from_environment({}, hosts="worker9:4"))
    assert state.hosts[0].gpus is None and state.hosts[0].hints == []
    assert "worker9  4      0-3    ?          no engines  not probed" in state_text(state)


def test_a_running_worlds_ranks_are_shown_rather_than_a_full_job():
    topology = topology_from_environment({}, hosts="worker0:8,worker1:8")
    state = cluster_state(topology, layout=topology.layout(4))
    assert [h.ranks for h in state.hosts] == [[0, 1, 2, 3], []]


# ---------------------------------------------------------------- hostile published Worlds (hypothesis)
PUBLISHED = {"pid": 4242, "id": "w-4242-1", "np": 3, "state": "running",
             "ranks": [{"rank": r, "host": "worker0", "engine_id": 10 + r, "state": "idle"}
                       for r in range(3)],
             "gpus": {"worker0": {
                 "source": "nvml", "error": None, "nics": ["mlx5_0"],
                 "gpus": [{"index": i, "name": "NVIDIA H200", "pci_bus_id": f"0000:1{i}:00.0",
                           "memory_total_mib": 143771, "memory_used_mib": 1024, "utilization_pct": 10 * i,
                           "numa_node": i, "cpu_affinity": "0-23"} for i in range(2)],
                 "links": {"GPU0": {"GPU0": "X", "GPU1": "NV18", "mlx5_0": "PXB"},
                           "GPU1": {"GPU0": "NV18", "GPU1": "X", "mlx5_0": "SYS"},
                           "mlx5_0": {"GPU0": "PXB", "GPU1": "SYS", "mlx5_0": "X"}}}}}


@FUZZ
@given(hostile(PUBLISHED))
@example(replaced(PUBLISHED, ("pid",), float("inf")))   # old code: "Infinity" in the panel's document
@example(replaced(PUBLISHED, ("gpus", "worker0", "gpus", 0, "utilization_pct"), 1e999))   # old: "%d" of inf
@example(replaced(PUBLISHED, ("ranks",), float("inf")))   # old code: TypeError (a float is no list)
@example(replaced(PUBLISHED, ("ranks", 1, "rank"), "12"))   # old code: TypeError sorting the ranks
@example(replaced(PUBLISHED, ("gpus", "worker0", "links", "GPU0", "mlx5_0"), "12"))   # old: ValueError
def test_a_hostile_published_world_is_shown_or_its_bad_parts_left_out(doc):
    """A World record another kernel (or a hand) wrote, with Infinity, NaN, huge ints, wrong types:
    the picture is still built, its faces render, and the hosts' rows stay strict JSON."""
    world = json.loads(dumps(doc))
    if not isinstance(world, dict):
        return
    topology = topology_from_environment({}, hosts="worker0:8")
    state = cluster_state(topology, published_inventories([world]), [world])
    assert state_text(state) and state_html(state)
    json.dumps([host.to_json() for host in state.hosts], allow_nan=False)
    assert isinstance(state.hosts[0].engine_summary, str)
