"""How allrun runs a command on a host, whatever reaches the host: ssh, a World's engine, or this
machine. One shell, one working folder rule, one environment (README, "`%allrun`"):

- **shell**: ``bash -c COMMAND`` (``sh -c`` where a host has no bash), neither a login nor an
  interactive shell, so ``$0`` is ``bash`` and no profile or rc file is read by allrun itself;
- **folder**: the caller's working folder (a notebook's: the kernel's; the ``allrun`` command's:
  where it was started) where that folder exists on the host, else the home folder (``$HOME``),
  as Open MPI does for ranks;
- **environment**: what a process started on that host has (ssh's session there; the engine's,
  less the variables that make a process a rank of a job: ``RANK``, ``OMPI_COMM_WORLD_*``,
  ``PMIX_*``...), plus the caller's ``PATH``, ``LD_LIBRARY_PATH``, ``PYTHONPATH`` and
  ``VIRTUAL_ENV`` (those mpiexec forwards to every rank), the ranks' interpreter's folder first on
  ``PATH`` (``pip`` is the ranks' ``pip`` on every host), plus the host's place in the command's
  host list: ``ALLRUN_HOST`` (its name as listed), ``ALLRUN_HOST_INDEX`` (0, 1, ...) and
  ``ALLRUN_HOST_COUNT``.

``RUN_SCRIPT`` does the folder, the variables and the shell in ``sh``; this machine and the
engines run it, ssh runs ``run_script_then``'s form of it behind its markers (``ssh/argv``).
Pure: the caller hands it the environment.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from mlp_magic.core.rank_variables import (MPI_LOCAL_RANK, RESPAWNED_RANK, RESPAWNED_SIZE, TENSORFLOW, TORCH,
                                           WORLD_ID, WORLD_RANK, WORLD_SIZE)

# The caller's variables every host gets: the ones mpiexec forwards to ranks (world/start/mpi).
FORWARDED = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV")
HOST, HOST_INDEX, HOST_COUNT = "ALLRUN_HOST", "ALLRUN_HOST_INDEX", "ALLRUN_HOST_COUNT"

# What makes a process a rank of a job (set by the World's bootstrap, torchrun, the launcher):
# a command run once per host is no rank, and an MPI program it starts must not join the job.
RANK_NAMES = frozenset({
    *TORCH, *TENSORFLOW, WORLD_RANK, WORLD_SIZE, WORLD_ID, RESPAWNED_RANK, RESPAWNED_SIZE, *MPI_LOCAL_RANK,
    "OMPI_UNIVERSE_SIZE", "OMPI_FILE_LOCATION", "OMPI_ARGV", "OMPI_COMMAND", "OMPI_NUM_APP_CTX",
    "OMPI_MCA_initial_wdir", "OMPI_MCA_num_procs", "OMPI_MCA_orte_ess_jobid",
})
# (a site's own OMPI_MCA_* settings stay)
RANK_PREFIXES = ("OMPI_COMM_WORLD_", "OMPI_WORLD_", "OMPI_MCA_ess_base_", "PMIX_", "PMI_", "PRTE_",
                 "HYDRA_", "HYDI_", "IPP_", "TORCHELASTIC_")

# sh; $1 the folder, $2 the command, then NAME=value words to export.
_PREPARE = (
    'cd -- "$1" 2>/dev/null || cd; __mlp_command=$2; shift 2; '
    'for __mlp_word do export "$__mlp_word"; done; unset __mlp_word; '
)
# Only execs at the end: the process (and its group) stays the one the transport started.
RUN_SCRIPT = _PREPARE + (
    'if command -v bash >/dev/null 2>&1; then exec bash -c "$__mlp_command"; fi; '
    'exec sh -c "$__mlp_command"'
)


def run_script_then(report: str) -> str:
    """``RUN_SCRIPT``, but the command runs as the script's child (in its process group) and
    ``report`` (sh, with the command's exit status in ``$__mlp_status``) runs once it ended; the
    script then exits with that status. For ssh, which returns only when every process holding
    the channel has ended: the report says the command's own end."""
    return _PREPARE + (
        '__mlp_shell=sh; if command -v bash >/dev/null 2>&1; then __mlp_shell=bash; fi; '
        '"$__mlp_shell" -c "$__mlp_command"; __mlp_status=$?; ' + report + '; exit "$__mlp_status"'
    )


NAME = "allrun"   # $0 of RUN_SCRIPT's own sh (never seen by the command: bash's $0 is "bash")


def host_variables(env: Mapping, host: str, index: int, count: int, python: str = "") -> dict:
    """What ``RUN_SCRIPT`` exports on host ``index`` of ``count`` named ``host``: the forwarded
    variables that ``env`` (the caller's) sets, and the host's place. ``python``: the ranks'
    interpreter (the engines run ``sys.executable``), whose folder goes first on ``PATH`` so that
    ``pip``, ``pip3`` and ``python -m pip`` are the ranks' whatever ``PATH`` says (a kernel that
    Jupyter starts by a venv's path, without its ``bin/`` on ``PATH``)."""
    found = {name: env[name] for name in FORWARDED if name in env}
    folder = os.path.dirname(python)
    if folder and found.get("PATH", "").split(os.pathsep)[0] != folder:
        found["PATH"] = os.pathsep.join(p for p in (folder, found.get("PATH")) if p)
    found.update({HOST: host, HOST_INDEX: str(index), HOST_COUNT: str(count)})
    return found


def script_arguments(folder: str, command: str, variables: Mapping) -> list:
    """``RUN_SCRIPT``'s arguments after ``$0``."""
    return [folder, command, *(f"{name}={value}" for name, value in variables.items())]


def shell_argv(folder: str, command: str, variables: Mapping) -> list:
    """The argv that runs ``command`` on this host by the rules above (this machine, an engine)."""
    return ["sh", "-c", RUN_SCRIPT, NAME, *script_arguments(folder, command, variables)]


def without_rank_variables(env: Mapping) -> dict:
    """``env`` less what makes a process a rank (an engine's environment -> a host's)."""
    return {name: value for name, value in env.items()
            if name not in RANK_NAMES and not name.startswith(RANK_PREFIXES)}


def helper_environment(env: Mapping, package_parent: str) -> dict:
    """The environment of a helper a rank starts on its host (the GPU agent, the GPU probe):
    ``env`` less the rank's identity (a helper is no rank: with ``RANK`` and ``MASTER_ADDR``,
    ``mlp-magic stacks`` took the agent for rank 0 of a torch job), with ``package_parent`` (the
    rank's copy of mlp_magic) first on ``PYTHONPATH``, unless it is an installed package's
    folder: the same Python finds it there anyway, and a ``PYTHONPATH`` entry goes before the
    standard library, which an old backport in site-packages (``enum.py``) would then shadow."""
    helper = without_rank_variables(env)
    if package_parent.rstrip(os.sep).rpartition(os.sep)[2] not in ("site-packages", "dist-packages"):
        helper["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, helper.get("PYTHONPATH")) if p)
    return helper


def caller_folder(getcwd) -> str:
    """The caller's working folder (``getcwd``: os.getcwd); "" when it was removed: the hosts
    then start in their home folder."""
    try:
        return getcwd()
    except OSError:
        return ""


# A command ended, but a process it left in the background holds its output open: how long its
# output is still read, whatever reaches the host, and what the host's stderr then says.
BACKGROUND_GRACE_S = 2.0
LEFT_IN_THE_BACKGROUND = ("allrun: the command ended, a process it left in the background still holds its "
                          "output: not waited for\n")
