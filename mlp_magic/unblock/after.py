"""After the ranks of a hung job came free: the default process group made again on every rank,
whoever unblocked them (``%mpirun --unblock``, or the panel's Unblock, which reaches the ranks
from the server and leaves this step to the kernel's next use of the World)."""
from __future__ import annotations

import secrets

from mlp_magic.ranks.job import call
from mlp_magic.unblock.pure import report
from mlp_magic.unblock.rank import mpi_world, side
from mlp_magic.unblock.rank.regroup import recreate_default_group

ASK_TIMEOUT_S = 30.0
REGROUP_TIMEOUT_S = 60.0


def regroup_if_unblocked(world) -> list[str]:
    """Where any rank was unblocked since its group was made, make the default group again on
    every rank (collective: all take part); the lines saying so, none otherwise."""
    everyone = [row.rank for row in world.layout]
    flags = call(world, everyone, side.unblocked, timeout=ASK_TIMEOUT_S,
                 what="asking the ranks whether they were unblocked")
    return regroup(world) if any(flag is True for flag in flags.values()) else []


def regroup(world) -> list[str]:
    """Make the default group again on every rank, under a store prefix the kernel chooses (the
    same on every rank whatever each one did before), after a new MPI communicator where an
    unblock revoked COMM_WORLD; the lines saying so."""
    everyone = [row.rank for row in world.layout]
    lines = _shrink_if_revoked(world, everyone)
    prefix = f"mlp_magic_unblock/{secrets.token_hex(6)}"
    answers = call(world, everyone, recreate_default_group, prefix, timeout=REGROUP_TIMEOUT_S,
                   what="making the default process group again")
    if lines and all(answer is None for answer in answers.values()):
        return lines   # an MPI-only World: no torch group to speak of
    return lines + report.regrouped(answers)


def _shrink_if_revoked(world, everyone: list) -> list[str]:
    """Where any rank's COMM_WORLD was revoked (ULFM: unblock/rank/mpi_world), every rank
    shrinks it together; the line saying so, none otherwise."""
    flags = call(world, everyone, mpi_world.revoked, timeout=ASK_TIMEOUT_S,
                 what="asking the ranks whether MPI.COMM_WORLD was revoked")
    if not any(flag is True for flag in flags.values()):
        return []
    answers = call(world, everyone, mpi_world.shrink_world, timeout=REGROUP_TIMEOUT_S,
                   what="making a new MPI communicator")
    return [report.mpi_shrunk(answers)]
