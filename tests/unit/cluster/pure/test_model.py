"""The cluster's one model, built from values only."""
from __future__ import annotations

from mlp_magic.cluster.pure.model import cluster_state
from mlp_magic.cluster.text import state_text
from mlp_magic.core.topology import topology_from_environment
from tests.unit.cluster.states import h200, two_host_state


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
