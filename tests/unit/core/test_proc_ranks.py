"""Ranks from a process's own environment (/proc/PID/environ), jobs told apart, launchers and
children recognised."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.proc_ranks import (RankInfo, children_of_ranks, is_launcher, is_python, is_stacks_tool,
                                       parse_cmdline, parse_environ, rank_of)

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
values = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=20)


@given(st.dictionaries(names, values, max_size=12))
def test_parse_environ_reads_what_the_kernel_writes(env):
    data = b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items())
    assert parse_environ(data) == env


@given(st.binary(max_size=200))
def test_parse_environ_takes_any_bytes(data):
    found = parse_environ(data)
    assert all(isinstance(k, str) and k and isinstance(v, str) for k, v in found.items())


def test_parse_environ_keeps_the_first_of_a_repeated_name_and_skips_junk():
    found = parse_environ(b"A=1\0junk\0=x\0A=2\0B==c\0\xff=\xfe\0")
    assert found == {"A": "1", "B": "=c", "\ufffd": "\ufffd"}


def test_parse_cmdline():
    assert parse_cmdline(b"python\0train.py\0--lr\0\x000.5\0") == ["python", "train.py", "--lr", "", "0.5"]
    assert parse_cmdline(b"") == []


OMPI = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "16", "PMIX_RANK": "5",
        "PMIX_NAMESPACE": "prterun-worker0-1234@1"}
TORCHRUN = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "GROUP_RANK": "1", "MASTER_ADDR": "worker0",
            "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none", "TORCHELASTIC_RESTART_COUNT": "0"}


@pytest.mark.parametrize("env, expected", [
    (OMPI, RankInfo(5, "OMPI_COMM_WORLD_RANK", "mpi prterun-worker0-1234@1", 16)),
    ({"PMIX_RANK": "2", "PMIX_NAMESPACE": "slurm.pmix.77.0"},
     RankInfo(2, "PMIX_RANK", "mpi slurm.pmix.77.0")),
    ({"PMI_RANK": "0", "PMI_SIZE": "4"}, RankInfo(0, "PMI_RANK", "mpi (size 4)", 4)),
    (TORCHRUN, RankInfo(3, "RANK", "torch none worker0:29500", 8)),
    # torchrun started by mpiexec: the worker's RANK is its rank, not its agent's MPI rank
    ({**OMPI, **TORCHRUN}, RankInfo(3, "RANK", "torch none worker0:29500", 8)),
    # a script that exported RANK itself under mpiexec: MPI's rank wins
    ({**OMPI, "RANK": "9", "LOCAL_RANK": "0"},
     RankInfo(5, "OMPI_COMM_WORLD_RANK", "mpi prterun-worker0-1234@1", 16)),
    ({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}, RankInfo(1, "RANK", "torch (size 2)", 2)),
    ({"MLP_MAGIC_RANK": "0"}, RankInfo(0, "MLP_MAGIC_RANK", "mlp_magic")),
    # a rank %mpirun --respawn started: its launcher's variables are the spawned job's (rank 0 of 1,
    # "@2"); it is rank 2 of the job it was spawned into
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1", "PMIX_NAMESPACE": "prterun-worker0-1234@2",
      "MLP_MAGIC_RESPAWNED_RANK": "2", "MLP_MAGIC_RESPAWNED_SIZE": "16"},
     RankInfo(2, "MLP_MAGIC_RESPAWNED_RANK", "mpi prterun-worker0-1234@1", 16)),
    ({"MLP_MAGIC_RANK": "1", "MLP_MAGIC_WORLD_SIZE": "2", "MLP_MAGIC_WORLD_ID": "world-a"},
     RankInfo(1, "MLP_MAGIC_RANK", "mlp_magic world-a", 2)),
])
def test_rank_of(env, expected):
    assert rank_of(env) == expected


@pytest.mark.parametrize("env", [
    {}, {"RANK": "3"}, {"LOCAL_RANK": "0"}, {"OMPI_COMM_WORLD_RANK": ""}, {"PMI_RANK": "-1"},
    {"PMIX_RANK": "x"}, {"RANK": "1", "LOCAL_RANK": "one"}, {"PMI_RANK": "12345678901"},
])
def test_no_rank(env):
    assert rank_of(env) is None


@given(st.dictionaries(st.sampled_from(["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK", "LOCAL_RANK",
                                        "WORLD_SIZE", "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID",
                                        "MASTER_PORT", "MLP_MAGIC_RANK", "MLP_MAGIC_RESPAWNED_RANK"]),
                       values))
def test_rank_of_never_fails_and_names_its_variable(env):
    found = rank_of(env)
    if found is not None:
        assert env[found.variable].strip() == str(found.rank) or int(env[found.variable]) == found.rank
        assert found.job


def test_two_jobs_on_one_host_are_told_apart():
    world = rank_of({**OMPI, "PMIX_NAMESPACE": "prterun-vm-1@1"})
    training = rank_of({**OMPI, "PMIX_NAMESPACE": "prterun-vm-2@1"})
    assert world.rank == training.rank and world.job != training.job
    # two kernels' plain Worlds (no MPI)
    first, second = (rank_of({"MLP_MAGIC_RANK": "0", "MLP_MAGIC_WORLD_ID": name}) for name in ("w1", "w2"))
    assert first.job != second.job


@pytest.mark.parametrize("exe, argv, expected", [
    ("/usr/bin/python3.11", ["python", "train.py"], True),
    ("", ["/venv/bin/python3", "-m", "x"], True),
    ("/opt/pypy3.10", ["pypy3"], True),
    ("/usr/bin/bash", ["bash", "-c", "python x"], False),
    ("/usr/bin/python3.11 (deleted)", ["x"], True),
    ("/usr/bin/pythonista", ["pythonista"], False),
    ("", [], False),
])
def test_is_python(exe, argv, expected):
    assert is_python(exe, argv) is expected


@pytest.mark.parametrize("argv, expected", [
    (["mpiexec", "-n", "4", "python", "train.py"], True),
    (["/usr/bin/prted", "--prtemca"], True),
    (["hydra_pmi_proxy", "--control-port"], True),
    (["/venv/bin/python", "-m", "torch.distributed.run", "--nproc-per-node", "4", "train.py"], True),
    (["/venv/bin/python3", "/venv/bin/torchrun", "--standalone", "train.py"], True),
    (["python", "train.py", "--launcher", "torchrun"], False),
    (["python", "-m", "mlp_magic.engine.main"], False),
    ([], False),
])
def test_is_launcher(argv, expected):
    assert is_launcher(argv) is expected


@pytest.mark.parametrize("argv, expected", [
    (["/venv/bin/python", "/venv/bin/mlp-magic", "stacks", "--match", "train"], True),
    (["python3", "-m", "mlp_magic.cli", "stacks", "-H", "w1"], True),
    (["/usr/bin/python3", "-I", "-S", "-c",
      "import sys; sys.path.insert(0, '/x'); from mlp_magic.stacks.scan import main; sys.exit(main())",
      "--match", "train"], True),
    (["/venv/bin/python", "/venv/bin/mlp-magic", "status"], False),
    (["python", "train.py", "--stage", "stacks"], False),
    (["python", "-c", "print('mlp_magic.stacks.scan')"], False),
    (["python", "-m", "pytest", "-k", "from mlp_magic.stacks.scan import main"], False),
    ([], False),
])
def test_is_stacks_tool(argv, expected):
    assert is_stacks_tool(argv) is expected


def test_children_of_ranks_follow_the_parent_chain_within_a_job():
    job = "mpi j"
    processes = {
        10: (1, (job, 0)),          # rank 0
        11: (10, (job, 0)),         # its DataLoader worker
        12: (11, (job, 0)),         # and that one's child
        20: (1, (job, 1)),          # rank 1
        21: (20, None),             # a shell it started
        22: (21, (job, 1)),         # ... running a python that inherited the rank
        30: (10, ("mpi other", 0)),  # another job's rank 0 started from rank 0: not a child
        40: (40, (job, 3)),         # its own parent (a loop in the table): stops
    }
    assert children_of_ranks(processes) == {11: 10, 12: 10, 22: 20}


@given(st.dictionaries(st.integers(1, 30), st.tuples(st.integers(0, 30),
                       st.one_of(st.none(), st.tuples(st.just("j"), st.integers(0, 2))))))
def test_children_of_ranks_always_ends_and_names_a_same_rank_ancestor(processes):
    for child, parent in children_of_ranks(processes).items():
        assert processes[child][1] == processes[parent][1] and child != parent
