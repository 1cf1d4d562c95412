"""The kernel's side of a World's keeper (world/keep/keeper): who owns the World, and whether it is kept.

Every World has a keeper from its start, so that ``%mpirun --keep`` can mark a running World
kept: the kernel's processes carry no parent-death signal any more (it could not be taken back),
and the keeper stops a World that is not kept the moment its kernel is gone. A kept World's
keeper waits for a kernel to attach, ``$MLP_MAGIC_KEEP_HOURS`` at most.
"""
from __future__ import annotations

import functools
import os

import psutil

from mlp_magic import config
from mlp_magic.world import published
from mlp_magic.world.keep import keeper


def this_kernel() -> tuple:
    """(pid, start time): the owner the keep file names."""
    return os.getpid(), psutil.Process().create_time()


def record_path(world) -> str:
    return published.record_path(os.getpid(), world.state_dir)


def start_keeping(world) -> None:
    """The keep file (this kernel owns the World, not kept) and the World's keeper."""
    world.publish()   # the record names the processes the keeper stops if this kernel dies
    keeper.write_keep(world.workdir, this_kernel(), world.kept, world.keep_hours, record_path(world))
    world.keeper = keeper.start_keeper(world.workdir)


def own(world) -> None:
    """This kernel owns ``world`` from now on (an attach): the keeper watches it instead."""
    keeper.write_keep(world.workdir, this_kernel(), world.kept, world.keep_hours, record_path(world))


def set_kept(world, kept: bool) -> None:
    """Mark the World kept (it outlives this kernel) or not; the idle limit read now."""
    hours = config.keep_hours() if kept else world.keep_hours   # a bad setting changes nothing
    world.kept, world.keep_hours = kept, hours
    own(world)
    world.publish()


def kept_now(workdir: str) -> tuple:
    """(kept, hours) as the World's keep file says."""
    keep = keeper.read_keep(workdir) or {}
    return bool(keep.get("kept")), keep.get("hours")


def keep_fields(world) -> dict:
    """What the World's record says of its keeping (mlp-magic worlds, the panel)."""
    return {"kept": world.kept, "keep_hours": world.keep_hours, "idle_since": None}


def private_fields(world) -> dict:
    """The record's private part's (never served): the keeper (readers tell a kept World from a
    dead kernel's by it) and the World's folder (an attach reads the facts there)."""
    process = world.keeper
    return {"keeper": [process.pid, _started(process.pid)] if process is not None else None,
            "workdir": world.workdir}


def taken_over(world) -> int | None:
    """The pid of the kernel that took the World over (``--attach --force``), or None."""
    keep = keeper.read_keep(world.workdir) if world.workdir else None
    owner = (keep or {}).get("owner") or [os.getpid()]
    return None if keep is None or owner[0] == os.getpid() else owner[0]


def begin_stop(world) -> None:
    """The kernel begins to stop the World: its keeper stays to the end, and a kept World is kept
    no more, so that a kernel that dies midway leaves the keeper to finish the stop."""
    if world.kept and world.workdir:
        world.kept = False
        try:
            own(world)
        except OSError:   # its folder is gone already (another kernel stopped it): nothing to keep
            pass


def end_keeping(world) -> None:
    """The kernel has stopped the World: the keeper leaves (its keep file gone) and is reaped."""
    if world.workdir:
        try:
            os.unlink(keeper.keep_path(world.workdir))
        except OSError:
            pass
    process, world.keeper = world.keeper, None
    if process is not None and hasattr(process, "wait"):   # our child (not an attached World's)
        process.terminate()   # it would see the keep file gone within a tick: no need to wait one
        try:
            process.wait(keeper.TICK_S * 3)
        except Exception:  # noqa: BLE001 - a keeper that does not leave is ended
            process.kill()
            process.wait(2)


def detach(world) -> None:
    """This kernel lets go of ``world`` and leaves its processes running (kept, or taken over by
    another kernel): the client, the watch on its processes and its publisher are closed."""
    client, world.client = world.client, None
    if world.lifeline is not None:
        world.lifeline.close()
    world.live.close()
    if client is not None:
        try:
            client.close(linger=0)
        except Exception:  # noqa: BLE001 - a half-dead client must not stop the leaving
            pass


@functools.lru_cache(maxsize=64)   # a World's record is written 5 times a second; its keeper stays
def _started(pid: int):
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def describe(world) -> str:
    """The start line's and --status's word on keeping ("" when not kept)."""
    if not world.kept:
        return ""
    return (f"; kept: outlives its kernel, stops {_hours(world.keep_hours)} after the last kernel "
            "leaves (MLP_MAGIC_KEEP_HOURS)")


def _hours(hours: float) -> str:
    return f"{hours:g} h" if hours >= 1 else f"{hours * 60:g} min"
