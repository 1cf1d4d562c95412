"""machine/topology: hostfiles read from disk (bounded: no pipe, device or folder), this
machine's slots, names and environment as the defaults. The parsing: tests/unit/core/test_topology.py."""
from __future__ import annotations

import os

from mlp_magic.core.hostfile import LOCALHOST
from mlp_magic.machine.names import this_machine_names
from mlp_magic.machine.topology import count_local_gpus, local_slot_count, topology_from_environment
from mlp_magic.machine.user_files import shown
from tests.unit.parser_errors import error_of


def topo(env=None, **kwargs):
    kwargs.setdefault("local_slots", lambda: 4)
    return topology_from_environment({} if env is None else env, **kwargs)


def hosts(topology):
    return [(h.name, h.slots) for h in topology.hosts]


def test_hostfile_from_the_variable_is_read_from_disk(tmp_path):
    path = tmp_path / "mlp_hostfile"
    path.write_text("172.22.128.95 slots=2\n172.22.128.96 slots=2\n")
    found = topo({"MLP_MPI_HOSTFILE": str(path)})
    assert hosts(found) == [("172.22.128.95", 2), ("172.22.128.96", 2)]
    assert found.master_addr == "172.22.128.95" and not found.is_local


def test_missing_hostfile_named_in_the_variable(tmp_path):
    missing = str(tmp_path / "no" / "hostfile")
    said = error_of(topo, {"MLP_MPI_HOSTFILE": missing})
    assert said == f"$MLP_MPI_HOSTFILE {shown(missing)}: no such file"


def test_a_pipe_or_a_device_as_hostfile_is_one_error_not_a_hang(tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)                       # opening it would wait for a writer
    assert error_of(topo, {}, hostfile=fifo) == f"--hostfile {shown(fifo)}: a pipe, not a file"
    # reading this one would never end
    assert error_of(topo, {}, hostfile="/dev/zero") == "--hostfile '/dev/zero': a device, not a file"


def test_missing_hostfile_option(tmp_path):
    missing = str(tmp_path / "nope")
    assert error_of(topo, {}, hostfile=missing) == f"--hostfile {shown(missing)}: no such file"


def test_hostfile_that_is_a_directory(tmp_path):
    assert error_of(topo, {"MLP_MPI_HOSTFILE": str(tmp_path)}) == \
        f"$MLP_MPI_HOSTFILE {shown(str(tmp_path))}: a folder, not a file"


def test_hostfile_that_is_not_text(tmp_path):
    path = tmp_path / "binary"
    path.write_bytes(b"a slots=2\n\xff\xfe\n")
    message = error_of(topo, {}, hostfile=str(path))
    assert message.startswith(f"--hostfile {shown(str(path))}: not UTF-8 text") and "byte 10" in message


def test_hostfile_path_with_a_nul_byte():
    assert error_of(topo, {}, hostfile="a\x00b").startswith("--hostfile 'a\\x00b': cannot read it: ")


def test_hostfile_under_a_file_is_an_os_error(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("a\n")
    message = error_of(topo, {}, hostfile=str(plain / "hostfile"))
    assert message.startswith(f"--hostfile {shown(str(plain / 'hostfile'))}: cannot read it: ")
    assert "Not a directory" in message


# ---------------------------------------------------------------- this machine

def test_the_defaults_are_this_processs_environment_and_this_machines_names(monkeypatch):
    monkeypatch.setenv("MLP_MPI_HOSTS", "node3:2")
    assert hosts(topology_from_environment(local_slots=lambda: 1)) == [("node3", 2)]
    name = sorted(this_machine_names() - {LOCALHOST})[0]
    assert topo({}, hosts=f"{name}:2").is_local
    assert not topo({}, hosts=f"{name}:2", local_names=frozenset()).is_local


def test_local_slot_count_uses_gpus_then_cores():
    assert local_slot_count(lambda: 8) == 8
    assert local_slot_count(lambda: 0) == (os.cpu_count() or 1)
    gpus = count_local_gpus()   # the real /dev listing of this machine
    assert gpus == sum(1 for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
    assert local_slot_count() == (gpus or os.cpu_count() or 1)
