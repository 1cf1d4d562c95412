"""Topology: the rank layout over the hosts, -np's limits, and the master address and port."""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.core.ranges import MAX_RANKS
from mlp_magic.core.topology import Host, Rank, Topology
from mlp_magic.machine.topology import topology_from_environment
from tests.unit.parser_errors import error_of

from tests.unit.core.test_topology import hosts, topo


# ---------------------------------------------------------------- layout

def test_layout_host_by_host():
    found = topo({}, hosts="a:2,b:3,c:1")
    assert found.layout(6) == [
        Rank(0, "a", 0, 0, 2), Rank(1, "a", 0, 1, 2),
        Rank(2, "b", 1, 0, 3), Rank(3, "b", 1, 1, 3), Rank(4, "b", 1, 2, 3),
        Rank(5, "c", 2, 0, 1),
    ]


def test_layout_fewer_ranks_than_slots():
    found = topo({}, hosts="a:4,b:4")
    assert found.ranks_per_host(5) == [4, 1]
    last_two = [(r.host, r.local_rank, r.local_world_size) for r in found.layout(5)][-2:]
    assert last_two == [("a", 3, 4), ("b", 0, 1)]
    assert found.ranks_per_host(3) == [3, 0]
    assert {r.host for r in found.layout(3)} == {"a"}


def test_layout_oversubscribed():
    found = topo({}, hosts="a:2,b:1")
    assert found.ranks_per_host(8, oversubscribe=True) == [6, 2]   # two whole rounds, then a's 2
    assert found.ranks_per_host(7, oversubscribe=True) == [5, 2]
    assert len(found.layout(8, oversubscribe=True)) == 8


def test_np_above_slots_is_an_error():
    found = topo({"MLP_MPI_HOSTS": "worker0:8,worker1:8"})
    assert error_of(found.layout, 17) == (
        "-np 17 is more than the 16 slots of $MLP_MPI_HOSTS (worker0:8, worker1:8); "
        "lower -np or pass --oversubscribe")


@pytest.mark.parametrize("np", [0, -1, True, "4", 2.0, None])
def test_np_must_be_a_positive_integer(np):
    assert error_of(topo().layout, np) == f"-np must be a positive integer, got {np!r}"


def test_np_has_an_upper_bound():
    assert error_of(topo().layout, MAX_RANKS + 1) == (
        f"-np {MAX_RANKS + 1} is more than the {MAX_RANKS} ranks mlp_magic can lay out")


def test_no_slots_at_all():
    empty = Topology((Host("a", 0, 0),), "test", "a")
    assert error_of(empty.layout, 1, True) == "test has no slots to put ranks on"


@settings(max_examples=200, deadline=None)
@given(slots=st.lists(st.integers(1, 9), min_size=1, max_size=6), np=st.integers(1, 80),
       oversubscribe=st.booleans())
def test_layout_properties(slots, np, oversubscribe):
    found = topo({}, hosts=",".join(f"h{i}:{s}" for i, s in enumerate(slots)))
    total = sum(slots)
    if np > total and not oversubscribe:
        assert "lower -np or pass --oversubscribe" in error_of(found.layout, np, oversubscribe)
        return
    ranks = found.layout(np, oversubscribe)
    assert [r.rank for r in ranks] == list(range(np))
    counts = found.ranks_per_host(np, oversubscribe)
    assert sum(counts) == np
    # host by host: the host index never goes down, local ranks count up from 0 on each host
    assert [r.node_rank for r in ranks] == sorted(r.node_rank for r in ranks)
    for index, host in enumerate(found.hosts):
        mine = [r for r in ranks if r.node_rank == index]
        assert all(r.host == host.name for r in mine)
        assert [r.local_rank for r in mine] == list(range(counts[index]))
        assert all(r.local_world_size == counts[index] for r in mine)
        if np <= total:
            assert counts[index] <= host.slots
        else:  # every slot used, extra ranks spread in proportion: at most one round more
            assert counts[index] >= host.slots
            assert counts[index] <= host.slots * (np // total + 1)


# ---------------------------------------------------------------- master address and port

def test_master_addr_from_worker0_only_for_the_platforms_hosts(tmp_path):
    env = {"MLP_WORKER_0_HOST": "10.0.0.7", "MLP_WORKER_0_PORT": "29500",
           "MLP_MPI_HOSTS": "worker0:8,worker1:8"}
    found = topo(env)
    assert (found.master_addr, found.master_port) == ("10.0.0.7", 29500)
    explicit = topo(env, hosts="other0:2,other1:2")   # not the platform's hosts: rank 0 is on other0
    assert (explicit.master_addr, explicit.master_port) == ("other0", None)


def test_master_addr_is_rank_zeros_host_when_the_list_is_reordered():
    env = {"MLP_WORKER_0_HOST": "10.0.0.7", "MLP_MPI_HOSTS": "10.0.0.5:8,10.0.0.7:8"}   # rack order
    assert topo(env).master_addr == "10.0.0.5"


def test_master_port_precedence():
    env = {"MLP_WORKER_NUM": "1", "MLP_WORKER_0_PORT": "29500", "MASTER_PORT": "1234"}
    assert topo(env).master_port == 29500
    del env["MLP_WORKER_0_PORT"]
    assert topo(env).master_port == 1234
    env["MASTER_PORT"] = "0"
    assert topo(env).master_port is None
    assert topo({"MLP_WORKER_NUM": "1", "MLP_WORKER_0_HOST": "w0"}).master_addr == "w0"


def test_is_local_only_for_a_single_loopback_host():
    assert topo({}, hosts="127.0.0.1:2").is_local
    assert topo({}, hosts="LocalHost:2").is_local
    assert not topo({}, hosts="localhost:2,worker1:2").is_local
    assert not topo({}, hosts="worker0:2").is_local


def test_ports_and_users_reach_the_hosts(tmp_path):
    path = tmp_path / "pssh"
    path.write_text("root@worker0:2222\nworker1 slots=2 port=2200 username=ops\n")
    found = topo({}, hostfile=str(path))
    assert found.hosts == (Host("worker0", 1, 0, 2222, "root"), Host("worker1", 2, 1, 2200, "ops"))


def test_default_environment_is_os_environ(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("MLP_", "SLURM_", "AZ_")) or name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MLP_MPI_HOSTS", "envhost:3")
    assert hosts(topology_from_environment()) == [("envhost", 3)]
