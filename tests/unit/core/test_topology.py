"""Topology: which source wins (options, hostfiles, MLP_*, Azure, torchrun, Slurm, this machine), and
errors for bad values. The layout and master address: test_layout_and_master.py; hostfiles read
from disk and this machine's slots: tests/unit/machine/test_topology.py."""
from __future__ import annotations

import pytest

from mlp_magic.core.hostfile import LOCALHOST, LOOPBACK
from mlp_magic.core.topology import LOCAL_SOURCE, Host, Topology, naming_errors, topology_of
from mlp_magic.machine.topology import topology_from_environment
from tests.unit.parser_errors import error_of


def topo(env=None, **kwargs):
    kwargs.setdefault("local_slots", lambda: 4)
    return topology_from_environment({} if env is None else env, **kwargs)


def hosts(topology):
    return [(h.name, h.slots) for h in topology.hosts]


@pytest.fixture
def hostfile(tmp_path):
    path = tmp_path / "hostfile"
    path.write_text("# platform hostfile\nhf0 slots=2\nhf1 slots=2\n")
    return str(path)


# ---------------------------------------------------------------- which source wins

@pytest.fixture
def every_source(hostfile):
    """An environment where every source is present at once."""
    return {
        "MLP_MPI_HOSTFILE": hostfile,
        "MLP_MPI_HOSTS": "mh0:3,mh1:3",
        "MLP_WORKER_NUM": "2", "MLP_WORKER_GPU": "8",
        "MLP_WORKER_0_HOST": "w0", "MLP_WORKER_1_HOST": "w1",
        "AZ_BATCH_HOST_LIST": "az0,az1", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "4",
        "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_TASKS_PER_NODE": "4(x2)",
    }


def test_source_order(every_source, hostfile, tmp_path):
    env = dict(every_source)
    other = tmp_path / "other"
    other.write_text("opt0 slots=1\n")
    assert topo(env, hostfile=str(other)).source == f"hostfile {other}"
    assert topo(env, hosts="h0:1").source == "-H h0:1"
    expected = [
        (f"$MLP_MPI_HOSTFILE ({hostfile})", [("hf0", 2), ("hf1", 2)], "MLP_MPI_HOSTFILE"),
        ("$MLP_MPI_HOSTS", [("mh0", 3), ("mh1", 3)], "MLP_MPI_HOSTS"),
        ("$MLP_WORKER_NUM", [("w0", 8), ("w1", 8)], "MLP_WORKER_NUM"),
        ("$AZ_BATCH_HOST_LIST", [("az0", 2), ("az1", 2)], "AZ_BATCH_HOST_LIST"),
        ("$SLURM_JOB_NODELIST", [("gpu01", 4), ("gpu02", 4)], "SLURM_JOB_NODELIST"),
        (LOCAL_SOURCE, [(LOCALHOST, 4)], None),
    ]
    for source, layout, variable in expected:
        found = topo(env)
        assert (found.source, hosts(found)) == (source, layout)
        if variable:
            del env[variable]


def test_empty_variables_count_as_unset(hostfile):
    env = {"MLP_MPI_HOSTFILE": "", "MLP_MPI_HOSTS": "  ", "MLP_WORKER_NUM": "", "SLURM_JOB_NODELIST": " "}
    assert topo(env).source == LOCAL_SOURCE


def test_options_conflict():
    assert error_of(topo, {}, hostfile="f", hosts="a") == "give either --hostfile or -H, not both"
    assert error_of(topo, {}, hostfile="  ") == "--hostfile: empty path"
    assert error_of(topo, {}, hosts="") == "-H: empty host list"


def test_errors_inside_a_hostfile_name_the_file_and_line(tmp_path):
    path = tmp_path / "hf"
    path.write_text("a slots=2\nb slots=zero\n")
    message = error_of(topo, {"MLP_MPI_HOSTFILE": str(path)})
    assert message.startswith(f"hostfile {path} (from $MLP_MPI_HOSTFILE) line 2 'b slots=zero'")
    assert "got 'zero'" in message
    path.write_text("")
    assert error_of(topo, {}, hostfile=str(path)) == \
        f"hostfile {path}: no hosts in it (empty, or only comments)"


# ---------------------------------------------------------------- MLP_* variables

def test_mlp_mpi_hosts():
    found = topo({"MLP_MPI_HOSTS": "worker0:8,worker1:8", "MLP_WORKER_0_HOST": "worker0"})
    assert hosts(found) == [("worker0", 8), ("worker1", 8)]
    assert found.total_slots == 16 and found.master_addr == "worker0"


def test_mlp_mpi_hosts_errors_name_the_variable():
    assert error_of(topo, {"MLP_MPI_HOSTS": "worker0:8,worker1:x"}).startswith(
        "$MLP_MPI_HOSTS item 2 'worker1:x': slots must be a positive integer, got 'x'")


def test_worker_variables():
    env = {"MLP_WORKER_NUM": "3", "MLP_WORKER_GPU": "8", "MLP_WORKER_0_HOST": "10.0.0.7",
           "MLP_WORKER_1_HOST": "10.0.0.8", "MLP_WORKER_2_HOST": "10.0.0.9", "MLP_WORKER_0_PORT": "29500"}
    found = topo(env)
    assert hosts(found) == [("10.0.0.7", 8), ("10.0.0.8", 8), ("10.0.0.9", 8)]
    assert (found.source, found.master_addr, found.master_port) == ("$MLP_WORKER_NUM", "10.0.0.7", 29500)
    assert [h.index for h in found.hosts] == [0, 1, 2]


def test_worker_names_default_and_all_hosts():
    assert hosts(topo({"MLP_WORKER_NUM": "2"})) == [("worker0", 1), ("worker1", 1)]
    assert hosts(topo({"MLP_WORKER_NUM": "2", "MLP_WORKER_GPU": "0"})) == [("worker0", 1), ("worker1", 1)]
    env = {"MLP_WORKER_NUM": "3", "MLP_WORKER_ALL_HOSTS": "a, b,c", "MLP_WORKER_1_HOST": "bee"}
    assert hosts(topo(env)) == [("a", 1), ("bee", 1), ("c", 1)]
    assert hosts(topo({"MLP_WORKER_ALL_HOSTS": "n[1-2]", "MLP_WORKER_GPU": "2"})) == [("n1", 2), ("n2", 2)]


def test_worker_num_zero_is_not_a_platform_job():
    assert topo({"MLP_WORKER_NUM": "0"}).source == LOCAL_SOURCE


@pytest.mark.parametrize("env, message", [
    ({"MLP_WORKER_NUM": "two"}, "$MLP_WORKER_NUM must be a non-negative integer, got 'two'"),
    ({"MLP_WORKER_NUM": "-1"}, "$MLP_WORKER_NUM must be a non-negative integer, got '-1'"),
    ({"MLP_WORKER_NUM": "\u0662"}, "$MLP_WORKER_NUM must be a non-negative integer, got '\u0662'"),
    ({"MLP_WORKER_NUM": "2", "MLP_WORKER_GPU": "8x"},
     "$MLP_WORKER_GPU must be a non-negative integer, got '8x'"),
    ({"MLP_WORKER_NUM": "9" * 30}, "$MLP_WORKER_NUM '999999999999999999999999999999' is more than 100000"),
    ({"MLP_WORKER_NUM": "2", "MLP_WORKER_ALL_HOSTS": "a,b,c"},
     "$MLP_WORKER_ALL_HOSTS names 3 hosts ('a,b,c') but $MLP_WORKER_NUM is 2"),
    ({"MLP_WORKER_NUM": "2", "MLP_WORKER_1_HOST": "a b"},
     "$MLP_WORKER_1_HOST: invalid host name 'a b' (letters, digits, '.', '-', '_', or an IP address)"),
    ({"MLP_WORKER_NUM": "2", "MLP_WORKER_ALL_HOSTS": "a,$(x)"},
     "$MLP_WORKER_ALL_HOSTS: invalid host name '$(x)'"),
    ({"MLP_WORKER_NUM": "2", "MLP_WORKER_0_HOST": "x", "MLP_WORKER_1_HOST": "X"},
     "$MLP_WORKER_NUM: host 'X' is listed twice (entries 1 and 2; list it once)"),
    ({"MLP_WORKER_NUM": "1", "MLP_WORKER_0_PORT": "70000"}, "$MLP_WORKER_0_PORT '70000' is more than 65535"),
    ({"MLP_WORKER_NUM": "1", "MLP_WORKER_0_PORT": "http"},
     "$MLP_WORKER_0_PORT must be a non-negative integer, got 'http'"),
])
def test_worker_variable_errors(env, message):
    assert error_of(topo, env).startswith(message)


# ---------------------------------------------------------------- Azure / torchrun

def test_azure_host_list():
    env = {"AZ_BATCH_HOST_LIST": "10.0.0.4,10.0.0.5", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8",
           "MASTER_ADDR": "10.0.0.4", "MASTER_PORT": "6105"}
    found = topo(env)
    assert hosts(found) == [("10.0.0.4", 8), ("10.0.0.5", 8)]
    assert (found.source, found.master_addr, found.master_port) == ("$AZ_BATCH_HOST_LIST", "10.0.0.4", 6105)
    del env["LOCAL_WORLD_SIZE"]
    assert hosts(topo(env)) == [("10.0.0.4", 8), ("10.0.0.5", 8)]   # WORLD_SIZE / hosts
    assert hosts(topo({"AZ_BATCH_HOST_LIST": "a,b"})) == [("a", 1), ("b", 1)]


@pytest.mark.parametrize("env, message", [
    ({"AZ_BATCH_HOST_LIST": "a,b", "WORLD_SIZE": "5"}, "$WORLD_SIZE 5 does not divide among the 2 hosts"),
    ({"AZ_BATCH_HOST_LIST": "a,b", "WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "2"},
     "$WORLD_SIZE 6 is not $LOCAL_WORLD_SIZE 2 x 2 hosts"),
    ({"AZ_BATCH_HOST_LIST": "a,a"}, "$AZ_BATCH_HOST_LIST: host 'a' is listed twice"),
    ({"AZ_BATCH_HOST_LIST": "a,b", "MASTER_ADDR": "a;b"}, "$MASTER_ADDR: invalid host name 'a;b'"),
    ({"WORLD_SIZE": "4.0"}, "$WORLD_SIZE must be a non-negative integer, got '4.0'"),
])
def test_azure_errors(env, message):
    assert error_of(topo, env).startswith(message)


def test_single_node_torchrun():
    found = topo({"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "MASTER_PORT": "29400"})
    assert (found.source, hosts(found), found.is_local) == \
        ("$WORLD_SIZE (single node)", [(LOCALHOST, 4)], True)
    assert (found.master_addr, found.master_port) == (LOOPBACK, 29400)
    assert "more than the 4 slots of $WORLD_SIZE (single node)" in error_of(found.layout, 5)


def test_multi_node_torchrun_without_a_host_list_falls_through():
    assert topo({"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}).source == LOCAL_SOURCE


# ---------------------------------------------------------------- Slurm

def test_slurm_node_sets_and_tasks_per_node():
    found = topo({"SLURM_JOB_NODELIST": "gpu[01-04,07]", "SLURM_TASKS_PER_NODE": "8(x2),4(x3)"})
    assert hosts(found) == [("gpu01", 8), ("gpu02", 8), ("gpu03", 4), ("gpu04", 4), ("gpu07", 4)]
    assert (found.source, found.master_addr) == ("$SLURM_JOB_NODELIST", "gpu01")


@pytest.mark.parametrize("env, expected", [
    ({"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2"}, [("n1", 2), ("n2", 2), ("n3", 2)]),
    ({"SLURM_JOB_NODELIST": "n[1-2],login"}, [("n1", 1), ("n2", 1), ("login", 1)]),
    ({"SLURM_NODELIST": "c1,c2", "SLURM_NTASKS_PER_NODE": "3"}, [("c1", 3), ("c2", 3)]),
    ({"SLURM_JOB_NODELIST": "r[1-2]-n[0-1]", "SLURM_TASKS_PER_NODE": "1(x3),2"},
     [("r1-n0", 1), ("r1-n1", 1), ("r2-n0", 1), ("r2-n1", 2)]),
])
def test_slurm_variants(env, expected):
    assert hosts(topo(env)) == expected


@pytest.mark.parametrize("env, message", [
    ({"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "8(x2)"},
     "$SLURM_TASKS_PER_NODE '8(x2)' does not match 3 nodes"),
    ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "8(x9)"},
     "'8(x9)' counts more than the 2 nodes"),
    ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "0"}, "cannot read '0' in '0'"),
    ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x0),2"}, "cannot read '2(x0)'"),
    ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "8[x2]"}, "cannot read '8[x2]'"),
    ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "9" * 40}, "cannot read '9999"),
    ({"SLURM_JOB_NODELIST": "n[1-2", "SLURM_TASKS_PER_NODE": "1"},
     "$SLURM_JOB_NODELIST: host list 'n[1-2': unclosed"),
    ({"SLURM_JOB_NODELIST": "a;b"}, "$SLURM_JOB_NODELIST: invalid host name 'a;b'"),
    ({"SLURM_JOB_NODELIST": "n[1-2],n1"}, "$SLURM_JOB_NODELIST: host 'n1' is listed twice"),
    ({"SLURM_JOB_NODELIST": ",,"}, "$SLURM_JOB_NODELIST ',,' names no hosts"),
])
def test_slurm_errors(env, message):
    assert message in error_of(topo, env)


# ---------------------------------------------------------------- the local machine

def test_local_machine_default():
    found = topo({}, local_slots=lambda: 6)
    assert found == Topology((Host(LOCALHOST, 6, 0),), LOCAL_SOURCE, LOOPBACK, True, None)
    assert found.host_names() == [LOCALHOST] and found.total_slots == 6
    # the embedded default oversubscribes when asked for more ranks than its guess
    assert [r.local_rank for r in found.layout(9)] == list(range(9))


def test_local_machine_master_port_from_master_port():
    assert topo({"MASTER_PORT": "29501"}).master_port == 29501
    assert topo({"MLP_WORKER_0_PORT": "29502"}).master_port is None  # not a platform job


def test_explicit_localhost_slots_are_not_oversubscribed():
    found = topo({}, hosts="localhost:2")
    assert found.is_local and found.master_addr == LOOPBACK
    assert error_of(found.layout, 3) == (
        "-np 3 is more than the 2 slots of -H localhost:2 (localhost:2); lower -np or pass --oversubscribe")
    assert len(found.layout(3, oversubscribe=True)) == 3


# ---------------------------------------------------------------- what it is given

def test_topology_of_reads_only_what_it_is_given():
    asked = []

    def read(path, what):
        asked.append((path, what))
        return "a slots=2\n"
    found = topology_of({"MLP_MPI_HOSTFILE": "/nowhere"}, hostfile=None, hosts=None, read_text=read,
                        local_slots=lambda: 1 / 0, local_names=frozenset({"a"}))
    assert asked == [("/nowhere", "$MLP_MPI_HOSTFILE")] and hosts(found) == [("a", 2)]
    assert found.is_local and found.master_addr == LOOPBACK   # "a" is one of this machine's names
    here = topology_of({}, hostfile=None, hosts="A:3", read_text=read, local_slots=lambda: 1,
                       local_names=frozenset())
    assert not here.is_local and here.master_addr == "A"


@pytest.mark.parametrize("error, message", [
    (FileNotFoundError(2, "gone"), "--hostfile: no such file 'hf'"),
    (IsADirectoryError(21, "folder"), "--hostfile: 'hf' is a directory, not a hostfile"),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
     "--hostfile: 'hf' is not UTF-8 text (invalid start byte at byte 0)"),
    (PermissionError(13, "Permission denied"), "--hostfile: cannot read 'hf': [Errno 13] Permission denied"),
    (ValueError("embedded null byte"), "--hostfile: cannot read 'hf': embedded null byte"),
])
def test_a_plain_readers_errors_are_named_by_the_option(error, message):
    def read(path):
        raise error
    assert error_of(topo, {}, hostfile="hf", read_text=read) == message
    assert error_of(naming_errors(read), "hf", "--hostfile") == message
