"""Which rank died, and how: read from the launcher's log (pure text in, sentence out)."""
from __future__ import annotations

import re

from mlp_magic.core.ranges import fold_ranks

# What the launchers say about the first process to fail, most authoritative first. Each names the
# MPI rank (our rank) directly, whatever host it ran on and however late its host's lines arrived.
_LAUNCHER_NAMES_RANK = (
    # OpenMPI 4/5, a signal or an abort: "process rank 2 with PID 77 on node worker1 exited on signal 9"
    re.compile(r"process\s+rank\s+(\d+)\s+with\s+PID", re.IGNORECASE),
    # OpenMPI 4/5, a non-zero exit: "The first process to do so was: Process name: [prterun-x@1,2]"
    re.compile(r"first process to do so was:\s*Process name:\s*\[[^\]]*?,(\d+)\]", re.IGNORECASE),
    # MPICH's hydra: "=   RANK 2 PID 77 RUNNING AT worker1"
    re.compile(r"RANK\s+(\d+)\s+PID\s+\d+\s+RUNNING AT"),
    # Open MPI 5 under ULFM's recovery (see ulfm_deaths): "errmgr:dvm: proc [prterun-x@1,2] aborted"
    re.compile(r"errmgr:\w+: proc \[[^\]]*?,(\d+)\] (?:aborted|exited)"),
)
# What the MPI launchers themselves say when a rank ends badly.
_LAUNCHER_LINES = re.compile(
    r"(exited on signal|non-zero status|Exit code:|Process name:|killed|Segmentation fault"
    r"|EXIT CODE|BAD TERMINATION|aborted by signal)",
    re.IGNORECASE,
)


def launcher_named_rank(log_text: str) -> int | None:
    for pattern in _LAUNCHER_NAMES_RANK:
        match = pattern.search(log_text)
        if match:
            return int(match.group(1))
    return None


def first_dead_rank(log_text: str, exited_ranks=()) -> int | None:
    """The launcher's word first; else (plain engines, no launcher) the lowest rank whose own
    process the World saw exit."""
    rank = launcher_named_rank(log_text)
    if rank is not None:
        return rank
    return min(exited_ranks, default=None)


def launcher_report(log_text: str, limit: int = 6) -> list:
    lines = [line.strip() for line in log_text.splitlines() if _LAUNCHER_LINES.search(line)]
    return lines[:limit]


def death_note(log_text: str, exited_ranks, pid_of_rank: dict, host_of_rank) -> str:
    rank = first_dead_rank(log_text, exited_ranks)
    who = (f"rank {rank} (pid {pid_of_rank.get(rank, '?')} on {host_of_rank(rank)}) died first"
           if rank is not None else "a rank's process exited")
    detail = "; ".join(launcher_report(log_text))
    return (f"{who} during the cell" + (f" [{detail}]" if detail else "")
            + "; an MPI world cannot be partly restarted: `%mpirun --restart` starts all ranks again")


# Open MPI 5's launcher under ULFM recovery, with errmgr_base_verbose 5 (world/start/mpi): each
# failed rank, the job going on: "errmgr:dvm: proc [prterun-vm-3865@1,2] aborted by signal",
# "... exited with non-zero status 3", "... terminated without sync" (status 0 before
# MPI_Finalize). The rank is the vpid after ','; the job is 1, the World's ranks: processes
# spawned since (MPI_Comm_spawn) are jobs 2, 3, ..., numbered from 0 again: a rank of ours only where
# ``%mpirun --respawn`` made it one.
_ULFM_DEATH = re.compile(r"errmgr:\w+: proc \[[^\]@]*@(\d+),(\d+)\] "
                         r"(aborted by signal|terminated without sync|exited with non-zero status (-?\d+))")
_HOW = {"aborted by signal": "was killed by a signal",
        "terminated without sync": "ended (status 0) without finishing MPI"}
EXITED_WITH_STATUS = "exited with status"   # non-zero: the one end the others' MPI never hears of


def ulfm_deaths(log_text: str) -> dict:
    """{rank: how it ended} for each rank of the World's job (1) the launcher says failed."""
    return {index: how for (job, index), how in ulfm_failures(log_text).items() if job == 1}


def ulfm_failures(log_text: str) -> dict:
    """{(job, index): how it ended} for each process the launcher says failed (first word wins):
    the World's ranks are job 1, the processes spawned since (a respawned rank) jobs 2, 3..."""
    found: dict = {}
    for match in _ULFM_DEATH.finditer(log_text):
        job, index, how, code = int(match.group(1)), int(match.group(2)), match.group(3), match.group(4)
        found.setdefault((job, index), _HOW.get(how) or f"{EXITED_WITH_STATUS} {code}")
    return found


def survivors_note(dead: dict, living: int, pid_of_rank: dict, host_of_rank) -> str:
    """The cell's note when ranks died ({rank: how}) and ``living`` ranks live on."""
    who = "; ".join(f"rank {rank} (pid {pid_of_rank.get(rank, '?')} on {host_of_rank(rank)}) {how}"
                    for rank, how in sorted(dead.items()))
    ranks = fold_ranks(sorted(dead))
    unheard = [rank for rank, how in dead.items() if how.startswith(EXITED_WITH_STATUS)]
    back = "`%mpirun --restart` starts all ranks again" if unheard else \
        f"`%mpirun --respawn` brings {'them' if len(dead) > 1 else 'it'} back"
    note = (f"{who} during the cell; the other {living} ranks kept their state and run the next "
            f"cells without rank{'s' if len(dead) > 1 else ''} {ranks} ({back})")
    if unheard:
        # measured with Open MPI 5.0.11: the others' MPI hears of a rank killed by a signal or
        # ended with status 0, never of a non-zero exit, and a collective with it then waits
        note += (f"; Open MPI does not tell the other ranks of a non-zero exit, so an MPI call "
                 f"with rank{'s' if len(unheard) > 1 else ''} {fold_ranks(sorted(unheard))} would hang")
    return note


# What a survivor's collective with a dead rank raises: ULFM's MPI errors (mpi4py names the class),
# gloo's connection to it closed, torch's wrapper of either.
_WITHOUT_A_DEAD_RANK = ("MPI_ERR_PROC_FAILED", "MPI_ERR_REVOKED", "Connection closed by peer",
                        "Connection reset by peer")


def collective_without_note(dead: list, errors: list) -> str:
    """The cell's note where ranks failed in a collective that needs the ``dead`` ranks (their
    ``errors``, as each rank raised them); "" where none of them did."""
    if not dead or not any(marker in error for error in errors for marker in _WITHOUT_A_DEAD_RANK):
        return ""
    many = len(dead) > 1
    return (f"rank{'s' if many else ''} {fold_ranks(sorted(dead))} {'are' if many else 'is'} dead: a "
            "collective over every rank (MPI's COMM_WORLD, torch's default group) fails without "
            f"{'them' if many else 'it'}; the live ranks can go on among themselves "
            "(MPI: `MPI.COMM_WORLD.Shrink()`), `%mpirun --respawn` starts "
            f"{'them' if many else 'it'} again, or `%mpirun --restart` starts all ranks again")
