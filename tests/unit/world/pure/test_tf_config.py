"""world/pure/tf_config and world/rank_setup: TensorFlow's TF_CONFIG on every rank, as Azure ML
sets it for a TensorFlow job (every rank a worker at its host's address, its rank the index)."""
import json
from types import SimpleNamespace

from hypothesis import given, strategies as st

from mlp_magic.engine.identity import free_ports
from mlp_magic.world.pure.tf_config import tf_config, tf_workers
from mlp_magic.world.rank_setup import rank_variables

ADDRESSES = st.one_of(st.ip_addresses(v=4).map(str), st.ip_addresses(v=6).map(str))


@given(st.lists(st.tuples(ADDRESSES, st.integers(1, 65535)), min_size=1, max_size=40), st.data())
def test_the_value_names_every_worker_in_rank_order_and_this_ranks_index(hosts, data):
    index = data.draw(st.integers(0, len(hosts) - 1))
    workers = tf_workers([a for a, _ in hosts], [p for _, p in hosts])
    config = json.loads(tf_config(workers, index))
    assert config["task"] == {"type": "worker", "index": index}
    assert config["environment"] == "cloud"
    listed = config["cluster"]["worker"]
    assert len(listed) == len(hosts)
    for (address, port), worker in zip(hosts, listed):
        host, _, listed_port = worker.rpartition(":")
        assert int(listed_port) == port
        assert host == (f"[{address}]" if ":" in address else address)   # gRPC's form for IPv6


def world_of(hosts: list, ports: list, local=False):
    layout = [SimpleNamespace(rank=r, local_rank=0, local_world_size=1, node_rank=r)
              for r in range(len(hosts))]
    identities = {r: {"addr": a, **({"tf_port": p} if p else {})}
                  for r, (a, p) in enumerate(zip(hosts, ports))}
    return SimpleNamespace(layout=layout, np=len(hosts), master=(hosts[0], 29500), identities=identities,
                           spec=SimpleNamespace(topology=SimpleNamespace(is_local=local)))


def test_each_rank_is_told_the_cluster_and_its_own_index():
    world = world_of(["10.0.0.1", "10.0.0.2"], [4001, 4002])
    told = [json.loads(rank_variables(world, row)[0]["TF_CONFIG"]) for row in world.layout]
    assert [t["cluster"]["worker"] for t in told] == [["10.0.0.1:4001", "10.0.0.2:4002"]] * 2
    assert [t["task"]["index"] for t in told] == [0, 1]


def test_a_local_world_names_loopback_and_a_world_without_the_ports_sets_none():
    local = world_of(["192.168.1.5", "192.168.1.5"], [4001, 4002], local=True)
    assert json.loads(rank_variables(local, local.layout[1])[0]["TF_CONFIG"])["cluster"]["worker"] == [
        "127.0.0.1:4001", "127.0.0.1:4002"]
    older = world_of(["10.0.0.1", "10.0.0.2"], [4001, None])   # a kept World of an older mlp_magic
    assert "TF_CONFIG" not in rank_variables(older, older.layout[0])[0]


def test_free_ports_are_distinct():
    ports = free_ports(3)
    assert len(set(ports)) == 3 and all(0 < p < 65536 for p in ports)
