"""The document's parts without a server: cluster's model as the panel gets it, the settings."""
from __future__ import annotations

from mlp_magic.cluster.pure.model import (cluster_state, failed_state, published_inventories,
                                          world_engines_by_key)
from mlp_magic.cluster.reachability import Reachability
from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.gpu import GpuInfo, HostGpus
from mlp_magic.panel import MlpMagicPanel

LOCAL = frozenset({"localhost", "127.0.0.1", "::1", "node7"})
TOPOLOGY = topology_from_environment({}, hosts="node7:2,node8:1")
GPU = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:18:00.0",
       "memory_total_mib": 81559, "memory_used_mib": 4, "utilization_pct": 0, "numa_node": 0,
       "cpu_affinity": "0-79"}


def world(pid, ranks, **extra):
    return {"pid": pid, "np": len(ranks), "ranks": ranks, **extra}


def gpu_lists(snapshot: dict) -> list:
    """Each host's GPUs as the panel reads them (None: not probed)."""
    return [h["gpus"] and h["gpus"]["gpus"] for h in snapshot["hosts"]]


def test_local_gpus_go_to_this_machine_under_any_of_its_names():
    reach = {"node7": Reachability(True, 0.0, None), "node8": Reachability(False, 1000.0, "no answer")}
    local = HostGpus(host="localhost", source="nvml", gpus=[GpuInfo(**GPU)])
    snapshot = cluster_state(TOPOLOGY, [local], [], reach, LOCAL, updated_at="t").to_json()
    assert gpu_lists(snapshot) == [[GPU], None]
    assert [(h["reachable"], h["error"]) for h in snapshot["hosts"]] == [(True, None), (False, "no answer")]
    assert snapshot["hosts"][0]["gpus"]["source"] == "nvml" and snapshot["updated_at"] == "t"
    assert [h["ranks"] for h in snapshot["hosts"]] == [[0, 1], [2]]
    assert snapshot["source"] == "-H node7:2,node8:1"


def test_gpus_a_world_publishes_for_a_remote_host():
    published = [world(5, [], gpus={"node8": {"host": "node8", "source": "nvml", "gpus": [GPU]}})]
    snapshot = cluster_state(TOPOLOGY, published_inventories(published), published, {}, LOCAL, "t").to_json()
    assert gpu_lists(snapshot) == [None, [GPU]]
    assert [h["reachable"] for h in snapshot["hosts"]] == [None, None]  # not probed
    assert [w["pid"] for w in snapshot["worlds"]] == [5]


def test_engines_are_grouped_by_host_and_ordered_by_rank():
    worlds = [world(5, [{"rank": 2, "host": "node8", "engine_id": 0, "state": "busy"},
                        {"rank": 1, "host": "localhost", "engine_id": 2, "state": "idle"},
                        {"rank": 0, "host": "node7", "engine_id": 1, "state": "idle"},
                        "not a rank"])]
    grouped = world_engines_by_key(worlds, LOCAL)
    assert [e.rank for e in grouped["<local>"]] == [0, 1]  # localhost and node7 are one host
    assert [e.to_json() for e in grouped["node8"]] == [{"rank": 2, "engine_id": 0, "world_pid": 5}]
    assert grouped["node8"][0].state == "busy"   # the text faces' summary; the JSON says it per rank


def test_no_topology_gives_no_hosts_and_the_error():
    snapshot = failed_state("hostfile h line 2: bad", "t").to_json()
    assert snapshot["hosts"] == [] and snapshot["error"] == "hostfile h line 2: bad"
    assert snapshot["source"] is None


def test_hostfile_setting_defaults_to_the_environment(monkeypatch):
    monkeypatch.setenv("MLP_MAGIC_HOSTFILE", "/etc/mlp/hostfile")
    assert MlpMagicPanel().hostfile == "/etc/mlp/hostfile"
    monkeypatch.delenv("MLP_MAGIC_HOSTFILE")
    assert MlpMagicPanel().hostfile == ""
