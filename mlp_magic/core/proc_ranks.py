"""Which processes of a host are ranks of a job, read from what /proc shows of them (pure).

A rank is known by its own environment (``/proc/PID/environ``: the variables it was started
with), never by pid order:
- MPI: ``OMPI_COMM_WORLD_RANK`` (Open MPI), ``PMIX_RANK`` (any PMIx launcher), ``PMI_RANK``
  (MPICH's Hydra, Intel MPI, Slurm's PMI);
- torch: ``RANK`` together with ``LOCAL_RANK`` (torchrun and torch.distributed.launch set both);
  under a torchrun started by mpiexec, the worker's ``RANK`` is its rank, not the agent's MPI one;
- ``MLP_MAGIC_RANK``: the plain engines a World starts without MPI (``MLP_MAGIC_WORLD_ID`` names
  the World).
The job a rank belongs to is told by its launcher's own id (``PMIX_NAMESPACE``,
``TORCHELASTIC_RUN_ID``...), so that two jobs on one host (a notebook's World and the training
run) are shown apart. A process whose ancestor is a rank of the same job with the same number
(a DataLoader worker, a ``multiprocessing`` child: they inherit the environment) is that rank's
child, not the rank.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from mlp_magic.core.rank_variables import (MPI_RANK, MPI_RANK_SIZE, RESPAWNED_RANK, RESPAWNED_SIZE,
                                           TORCH_LOCAL_RANK, TORCH_RANK, TORCH_WORLD_SIZE, WORLD_ID,
                                           WORLD_RANK, WORLD_SIZE)
from mlp_magic.core.records import Record

_SIZE_VARIABLES = {**MPI_RANK_SIZE, TORCH_RANK: TORCH_WORLD_SIZE, WORLD_RANK: WORLD_SIZE,
                   RESPAWNED_RANK: RESPAWNED_SIZE}
_SPAWNED_JOB = re.compile(r"@[0-9]+$")   # Open MPI's namespace of a spawned job: "prterun-vm-17@2"
# The launcher's name for one job, per family of variables (the first one set wins).
_JOB_VARIABLES = {"mpi": ("PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid",
                          "PMI_KVSNAME", "PMI_JOBID", "SLURM_JOB_ID"),
                  "torch": ("TORCHELASTIC_RUN_ID",),
                  "mlp_magic": (WORLD_ID,)}   # plain engines: the World's run folder
_TORCH_WORKER = ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "GROUP_RANK")
_PYTHON = re.compile(r"^(python|pypy)[0-9.]*[a-z]?$")
# Launchers carry a job's variables too (or start it) but run no rank's code.
_LAUNCHERS = re.compile(r"^(mpiexec|mpirun|orterun|prterun|prted|orted|hydra_pmi_proxy|mpiexec\.hydra"
                        r"|srun|slurmstepd|torchrun)$")
STACKS_SCANNER = "mlp_magic.stacks.scan"   # the per-host scanner, named in its ``python -c`` text
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch", "torch.distributed.elastic")
_NUMBER = re.compile(r"[0-9]{1,9}")


class RankInfo(Record, frozen=True):
    """What a process's environment says of its place in a job."""

    rank: int
    variable: str           # the variable the rank came from
    job: str                # the job's name: family and the launcher's id ("mpi prterun-vm-17@1")
    size: int | None = None  # the job's world size, when the environment gives it


def parse_environ(data: bytes) -> dict:
    """``/proc/PID/environ`` (NUL-separated ``NAME=value``) -> {name: value}; undecodable bytes
    are replaced, entries without ``=`` skipped; the first of a repeated name wins (getenv's)."""
    found: dict = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name:
            found.setdefault(name.decode("utf-8", "replace"), value.decode("utf-8", "replace"))
    return found


def parse_cmdline(data: bytes) -> list:
    """``/proc/PID/cmdline`` -> argv (a process that rewrote its title may leave one string)."""
    return [arg.decode("utf-8", "replace") for arg in data.rstrip(b"\0").split(b"\0")] if data else []


def _number(env: Mapping, name: str) -> int | None:
    value = env.get(name, "").strip()
    return int(value) if _NUMBER.fullmatch(value) else None


def rank_of(env: Mapping) -> RankInfo | None:
    """The rank this environment gives a process, or None when it carries none."""
    torch_rank = _number(env, TORCH_RANK) if _number(env, TORCH_LOCAL_RANK) is not None else None
    if torch_rank is not None and any(name in env for name in _TORCH_WORKER):
        return _info(env, torch_rank, TORCH_RANK, "torch")
    for name in (RESPAWNED_RANK, *MPI_RANK):
        rank = _number(env, name)
        if rank is not None:
            return _info(env, rank, name, "mpi")
    if torch_rank is not None:
        return _info(env, torch_rank, TORCH_RANK, "torch")
    rank = _number(env, WORLD_RANK)
    return None if rank is None else _info(env, rank, WORLD_RANK, "mlp_magic")


def _info(env: Mapping, rank: int, variable: str, family: str) -> RankInfo:
    size = _number(env, _SIZE_VARIABLES[variable])
    if size is None and family == "torch":
        size = _number(env, TORCH_WORLD_SIZE)
    ids = [env[name] for name in _JOB_VARIABLES[family] if env.get(name)]
    where = ids[0] if ids else ""
    if variable == RESPAWNED_RANK:   # spawned as job @2, @3...: a rank of the job it was spawned into
        where = _SPAWNED_JOB.sub("@1", where)
    if family == "torch" and env.get("MASTER_PORT"):   # the run id is "none" unless one was given
        where = f"{where} {env.get('MASTER_ADDR', '')}:{env['MASTER_PORT']}".strip()
    job = f"{family} {where}".strip() if where else f"{family} (size {size})" if size else family
    return RankInfo(rank, variable, job, size)


def is_python(exe: str, argv: Sequence[str]) -> bool:
    """A Python interpreter, by its executable (``/proc/PID/exe``) or, where that cannot be
    read, its argv[0]."""
    names = [exe.rsplit("/", 1)[-1]] if exe else []
    names += [argv[0].rsplit("/", 1)[-1]] if argv else []
    return any(_PYTHON.match(name.replace(" (deleted)", "")) for name in names)


def is_launcher(argv: Sequence[str]) -> bool:
    """mpiexec, prted, srun, torchrun and the like: they start ranks, they are none."""
    if not argv:
        return False
    if _LAUNCHERS.match(argv[0].rsplit("/", 1)[-1]):
        return True
    words = list(argv[1:4])
    return any(module in words or f"{module}.__main__" in words for module in _LAUNCHER_MODULES) or any(
        w.rsplit("/", 1)[-1] == "torchrun" for w in words[:2])


def is_stacks_tool(argv: Sequence[str]) -> bool:
    """``mlp-magic stacks`` (its console script, or ``python -m mlp_magic.cli stacks``) and its
    per-host scanner: never a process to dump (``--match stacks`` would otherwise show the
    command itself, reached over ssh)."""
    words = list(argv[:6])
    start = f"from {STACKS_SCANNER} import main"   # the scanner's ``python -c`` text
    if any(flag == "-c" and start in text for flag, text in zip(words[1:], words[2:])):
        return True
    if "stacks" not in words:
        return False
    return any(w.rsplit("/", 1)[-1] == "mlp-magic" for w in words[:2]) or "mlp_magic.cli" in words


def children_of_ranks(processes: Mapping[int, tuple]) -> dict:
    """{pid: pid of the rank it is a child of}, for processes that descend from another process
    of the same job with the same rank. ``processes``: {pid: (parent pid, (job, rank) or None)}
    for every process known, ranks or not (the chain may pass through others: a shell)."""
    children = {}
    for pid, (parent, key) in processes.items():
        if key is None:
            continue
        seen = {pid}
        while parent in processes and parent not in seen:
            seen.add(parent)
            grand, parent_key = processes[parent]
            if parent_key == key:
                children[pid] = parent
            parent = grand
    return children
