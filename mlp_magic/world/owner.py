"""The one owner of a kernel's running World: starts it, reuses it, refuses it while busy, stops it.

The magics hold one ``WorldOwner`` (mlp_magic/magics.py), and every command that reaches the
ranks asks it for the World; ``owner_of(shell)`` finds it from the kernel's shell. A World is
reused while its ``WorldSpec`` is unchanged; a busy World (a cell that timed out with ranks stuck
in C) refuses new work rather than queueing it.
"""
from __future__ import annotations

import time

from mlp_magic.core.ranges import fold_ranks
from mlp_magic.errors import MlpMagicError
from mlp_magic.unblock.after import regroup
from mlp_magic.unblock.pure.report import HUNG_HINT
from mlp_magic.world.start.display import StartProgress
from mlp_magic.world.world import World, WorldSpec


class WorldOwner:
    def __init__(self):
        self._world: World | None = None

    @property
    def world(self) -> World | None:
        """The running World, or None (never started, stopped, or its start failed)."""
        world = self._world
        return world if world is not None and world.client is not None else None

    def ensure(self, spec: WorldSpec, restart: bool = False, notice=print) -> World:
        """The World for ``spec``: the running one when it matches and lives, else a new one (the
        old one is stopped first, saying why)."""
        world = self.world
        if world is not None and world.spec == spec and not restart and world.alive():
            return world
        if world is not None:
            reason = ("restart asked" if restart
                      else "it stopped" if not world.alive() else "hosts or -np changed")
            notice(f"mlp_magic: stopping the World of {world.np} ranks ({reason})")
            self.stop()
        started = time.monotonic()
        progress = StartProgress()
        try:
            self._world = World(spec, notice=notice, progress=progress).start()
        finally:
            progress.close()
        notice(f"mlp_magic: started {self._world.describe()} in {time.monotonic() - started:.1f} s")
        return self._world

    def stop(self) -> World | None:
        """Stop the World (its processes and files); the World that was stopped, or None."""
        world, self._world = self._world, None
        if world is not None:
            world.stop()
        return world

    def idle_world(self, world: World, notice=print) -> World:
        """``world``, once no earlier job keeps its ranks busy; else one error naming them."""
        job = world.busy_job
        if job is None:
            return world
        job.settle()
        busy = job.unfinished_ranks()
        if not busy:
            job.release()
            world.busy_job = None
            if job.ended_badly:   # ranks stuck or failed: unblocked (the panel's Unblock)?
                for line in regroup(world):
                    notice(f"mlp_magic: {line}")
            return world
        raise MlpMagicError(
            f"ranks {fold_ranks(busy)} are still running an earlier cell that timed out or was "
            f"interrupted (blocked in a C call?): `%mpirun --stacks` shows where; {HUNG_HINT}"
        )


MAGICS_CLASS = "MlpMagics"   # mlp_magic/magics.py's class, as IPython's registry names it


def owner_of(shell) -> WorldOwner | None:
    """The WorldOwner of ``shell``'s mlp_magic (None where the extension is not loaded)."""
    magics = shell.magics_manager.registry.get(MAGICS_CLASS)
    return getattr(magics, "owner", None)


def kernel_world() -> World | None:
    """The World of the IPython kernel this runs in, if it has one."""
    from IPython import get_ipython

    shell = get_ipython()
    owner = owner_of(shell) if shell is not None else None
    return owner.world if owner is not None else None
