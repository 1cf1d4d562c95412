"""Which rank of a World died during a cell, and how: read from its launcher's log.

The launcher names the first rank to fail once the job has ended, a moment after the kernel
notices. Nothing announces that line (a file: no event for it without inotify, which the
standard library lacks), so the log is read again on core/deadline.until's pace until it names a
rank, or every launcher process has ended (its log is then complete), or the deadline.
"""
from __future__ import annotations

import time

from mlp_magic.core.deadline import until
from mlp_magic.world.pure.deaths import death_note, launcher_named_rank

LAUNCHER_PATIENCE_S = 2.0   # mpiexec reports a death once the job ended
PLAIN_PATIENCE_S = 0.3      # plain engines are processes of their own: their end is known at once


def how_ranks_died(world) -> str:
    """One sentence naming the rank that died first, and how (empty when the log says nothing)."""
    deadline = time.monotonic() + (LAUNCHER_PATIENCE_S if world.mpi is not None else PLAIN_PATIENCE_S)
    read = [""]

    def complete() -> bool:
        ended = not any(process.running() for process in world.processes[1:])
        read[0] = world.launcher_log()
        return ended or launcher_named_rank(read[0]) is not None

    until(complete, deadline, longest_s=0.1)
    pid_of_rank = {rank: identity["pid"] for rank, identity in world.identities.items()}
    return death_note(read[0], world.exited_ranks(), pid_of_rank, world.host_of)
