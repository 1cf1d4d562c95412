"""After the ranks of a hung job came free: a new MPI communicator where COMM_WORLD was revoked,
and the default process group made again on every rank,
whoever unblocked them (``%mpirun --unblock``, or the panel's Unblock, which reaches the ranks
from the server and leaves this step to the kernel's next use of the World)."""
from __future__ import annotations

import secrets

from mlp_magic.client.job import call
from mlp_magic.unblock.pure import report
from mlp_magic.unblock.rank import mpi_world, side
from mlp_magic.unblock.rank.regroup import recreate_default_group

ASK_TIMEOUT_S = 30.0
REGROUP_TIMEOUT_S = 60.0


def regroup(world) -> list[str]:
    """A new MPI communicator where an unblock revoked COMM_WORLD, and the default group made
    again where an unblock cut it, on every rank (the group under a store prefix the kernel
    chooses, the same on every rank whatever each one did before); the lines saying so."""
    everyone = [row.rank for row in world.layout if row.rank not in world.dead_ranks]
    lines = _shrink_if_revoked(world, everyone)
    flags = call(world, everyone, side.unblocked, timeout=ASK_TIMEOUT_S,
                 what="asking the ranks whether they were unblocked")
    if not any(flag is True for flag in flags.values()):
        return lines
    if world.dead_ranks:   # a group needs every rank: made again, it would wait for the dead
        return lines + [report.not_regrouped_without(sorted(world.dead_ranks))]
    prefix = f"mlp_magic_unblock/{secrets.token_hex(6)}"
    answers = call(world, everyone, recreate_default_group, prefix, timeout=REGROUP_TIMEOUT_S,
                   what="making the default process group again")
    return lines + report.regrouped(answers)


def _shrink_if_revoked(world, everyone: list) -> list[str]:
    """Where any rank's COMM_WORLD was revoked (ULFM: unblock/rank/mpi_world), every rank
    shrinks it together (an idle rank may not have seen the revocation yet); the line saying
    so, none otherwise."""
    flags = call(world, everyone, mpi_world.revoked, timeout=ASK_TIMEOUT_S,
                 what="asking the ranks whether MPI.COMM_WORLD was revoked")
    if not any(flag is True for flag in flags.values()):
        return []
    answers = call(world, everyone, mpi_world.shrink_world, timeout=REGROUP_TIMEOUT_S,
                   what="making a new MPI communicator")
    return [report.mpi_shrunk(answers)]
