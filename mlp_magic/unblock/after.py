"""After the ranks of a hung job came free: the default process group made again on every rank,
whoever unblocked them (``%mpirun --unblock``, or the panel's Unblock, which reaches the ranks
from the server and leaves this step to the kernel's next use of the World)."""
from __future__ import annotations

from mlp_magic.ranks.job import call
from mlp_magic.unblock.pure import report
from mlp_magic.unblock.rank import side
from mlp_magic.unblock.rank.regroup import recreate_default_group

ASK_TIMEOUT_S = 30.0
REGROUP_TIMEOUT_S = 60.0


def regroup_if_unblocked(world) -> list[str]:
    """Where any rank's connections were closed since its group was made, make the default group
    again on every rank (collective: all take part); the lines saying so, none otherwise."""
    everyone = [row.rank for row in world.layout]
    flags = call(world, everyone, side.unblocked, timeout=ASK_TIMEOUT_S,
                 what="asking the ranks whether they were unblocked")
    if not any(flag is True for flag in flags.values()):
        return []
    answers = call(world, everyone, recreate_default_group, timeout=REGROUP_TIMEOUT_S,
                   what="making the default process group again")
    return report.regrouped(answers)
