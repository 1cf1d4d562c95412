"""The one owner of a kernel's running World: starts it, reuses it, refuses it while busy, stops it.

The magics hold one ``WorldOwner`` (mlp_magic/magics.py), and every command that reaches the
ranks asks it for the World; ``owner_of(shell)`` finds it from the kernel's shell. A World is
reused while its ``WorldSpec`` is unchanged; a busy World (a cell that timed out with ranks stuck
in C) refuses new work rather than queueing it.
"""
from __future__ import annotations

import os
import time

from mlp_magic.core.ranges import fold_ranks, rank_words
from mlp_magic.debugging.pure.stops import HINT
from mlp_magic.errors import MlpMagicError
from mlp_magic.unblock.after import regroup
from mlp_magic.unblock.pure.report import HUNG_HINT
from mlp_magic.world import attach, published
from mlp_magic.world.keep import found, ownership
from mlp_magic.world.facts import read_facts
from mlp_magic.world.deaths import controller_ended, lost_hosts_refusal, unregistered_refusal
from mlp_magic.world.start.display import StartProgress
from mlp_magic.world.world import World, WorldSpec


class WorldOwner:
    def __init__(self):
        self._world: World | None = None

    @property
    def world(self) -> World | None:
        """The running World, or None (never started, stopped, its start failed, or another
        kernel took it over: said once, in one line)."""
        world = self._world
        if world is None or world.client is None:
            return None
        taker = ownership.taken_over(world)
        if taker is not None:
            self._world = None
            ownership.detach(world)
            print(f"mlp_magic: World {world.id} was taken over by kernel {found.kernel_name(taker)} "
                  "(`%mpirun --attach --force`): this kernel no longer drives it")
            return None
        return world

    def ensure(self, spec: WorldSpec, restart: bool = False, notice=print, keep: bool = False) -> World:
        """The World for ``spec``: the running one when it matches and lives, else a new one (the
        old one is stopped first, saying why); ``keep``: marked to outlive this kernel."""
        world = self.world
        lost = "" if world is None or restart else (
            controller_ended(world) or lost_hosts_refusal(world)
            or (world.alive() and unregistered_refusal(world)))   # a dead launcher: restarted, as ever
        if lost:
            self.stop()
            raise MlpMagicError(lost)
        if world is not None and world.spec == spec and not restart and world.alive():
            if keep and not world.kept:
                self.keep(True, notice)
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
            if keep:
                ownership.set_kept(self._world, True)
        except KeyboardInterrupt:   # World.start stopped what it had started: one line, no traceback
            raise MlpMagicError(f"the start of a World of {spec.np} ranks was interrupted after "
                                f"{time.monotonic() - started:.1f} s: nothing of it is left running; "
                                "the next %%mpirun cell starts one") from None
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

    def leave(self) -> None:
        """The kernel exits: a kept World is left to its keeper, any other one stopped."""
        world = self._world
        if world is not None and world.kept and world.alive():
            self._world = None
            ownership.detach(world)
        else:
            self.stop()

    def keep(self, on: bool, notice=print) -> World:
        """Mark the running World kept (it outlives this kernel) or not."""
        world = self.world
        if world is None:
            raise MlpMagicError("no World running: `%%mpirun --keep` starts one kept")
        ownership.set_kept(world, on)
        notice(f"mlp_magic: World {world.id} " + (ownership.describe(world).removeprefix("; ") if on else
               "is no longer kept: it stops with this kernel"))
        return world

    def attach(self, world_id: str | None, force: bool, notice=print) -> World:
        """Take up a running World of this user on this machine (``--attach``)."""
        if self.world is not None:
            raise MlpMagicError(f"this kernel drives World {self.world.id} already: `%mpirun --stop` "
                                "it first, or attach from another kernel")
        record = found.find(world_id)
        if record.get("kernel") == "alive" and record["pid"] != os.getpid() and not force:
            raise MlpMagicError(f"World {record['id']} is driven by kernel "
                                f"{found.kernel_name(record['pid'])}: `%mpirun --attach ID --force` "
                                "takes it over (that kernel is told)")
        facts = read_facts(published.private_part(record)["workdir"])
        keeper = published.private_part(record).get("keeper") or [None]
        self._world = attach.attach_world(facts, keeper[0], notice)
        if record["pid"] != os.getpid():
            published.withdraw(record["pid"], self._world.state_dir)
        busy = attach.busy_ranks(self._world)
        if busy:
            notice(f"mlp_magic: ranks {fold_ranks(busy)} still run a cell of the kernel that left: "
                   f"the next cell waits for them (`%mpirun --stacks` shows where)")
        return self._world

    def idle_world(self, world: World, notice=print) -> World:
        """``world``, once no earlier job keeps its ranks busy; else one error naming them."""
        job = world.busy_job
        if job is None:
            return world
        job.settle()
        busy = [rank for rank in job.unfinished_ranks() if rank not in world.dead_ranks]
        if not busy:
            world.release_busy()
            if job.ended_badly:   # ranks stuck or failed: unblocked (the panel's Unblock)?
                for line in regroup(world):
                    notice(f"mlp_magic: {line}")
            return world
        stopped = getattr(job, "paused_ranks", dict)()   # a cell's ranks at a breakpoint
        if stopped:
            raise MlpMagicError(f"{rank_words(sorted(stopped))} stopped at a breakpoint in an earlier "
                                f"cell: {HINT}")
        raise MlpMagicError(
            f"{rank_words(busy)} {'is' if len(busy) == 1 else 'are'} still running an earlier cell "
            "that timed out or was interrupted (blocked in a C call?): `%mpirun --stacks` shows where; "
            f"{HUNG_HINT}"
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
