"""``%mpirun``'s line verbs on the running World: ``--status``, ``--stop``, ``--restart``, ``--stacks``."""
from __future__ import annotations

from mlp_magic.errors import MlpMagicError
from mlp_magic.mpirun.plan import wanted_spec
from mlp_magic.output import logs
from mlp_magic.stacks.snapshot import stack_snapshot


def status(owner) -> str:
    world = owner.world
    return world.describe() if world else "no World running (the next %%mpirun cell starts one)"


def stop(owner) -> str:
    world = owner.stop()
    return f"stopped the World of {world.np} ranks" if world else "no World running"


def restart(owner, args, env, notice=print) -> str:
    return owner.ensure(wanted_spec(args, env, owner.world), restart=True, notice=notice).describe()


def stacks(owner, args) -> tuple:
    """Every rank's Python stack, merged: (text, html)."""
    world = owner.world
    if world is None:
        raise MlpMagicError("%mpirun --stacks: no World running")
    return stack_snapshot(world, [row.rank for row in world.layout], logs.new_cell_dir(args.log_dir))
