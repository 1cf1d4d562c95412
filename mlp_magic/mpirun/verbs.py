"""``%%mpirun``'s verbs on the World: a cell, and the line forms ``--status``, ``--stop``,
``--restart`` and ``--stacks`` (commands/table names them)."""
from __future__ import annotations

from mlp_magic.debugging.pure.stops import HINT, stops_text
from mlp_magic.errors import MlpMagicError, RankFailure
from mlp_magic.mpirun.plan import wanted_spec
from mlp_magic.mpirun.run import run_cell
from mlp_magic.mpirun.whole_output import keep_whole_output
from mlp_magic.output import logs
from mlp_magic.stacks.snapshot import stack_snapshot


def cell(context, options) -> None:
    run_and_keep(context, options, context.cell)


def run_and_keep(context, options, code: str, world=None) -> None:
    """Run ``code`` as a cell; its result goes to ``-o NAME``, a failed one too, with every
    rank's whole output (what the notebook showed was capped)."""
    try:
        result = run_cell(context.owner, options, code, context.env, notice=context.notice, world=world)
    except RankFailure as failure:
        keep_result(context, options, failure.result)
        raise
    keep_result(context, options, result)


def keep_result(context, options, result) -> None:
    """``-o NAME``: the result in the notebook, with every rank's whole output."""
    if options.out:
        keep_whole_output(context.owner.world, result, options.out, context.notice)
        context.store(options.out, result)


def status(context, options) -> None:
    """The World, its ranks' states, and where its ranks stopped at a breakpoint, if they did."""
    world = context.owner.world
    if world is None:
        print("no World running (the next %%mpirun cell starts one)")
        return
    print(f"{world.describe()}\n{world.live.summary()}")
    stopped = getattr(world.busy_job, "paused_ranks", dict)()
    if stopped:
        print(f"{stops_text(stopped)}\n{HINT}")


def stop(context, options) -> None:
    world = context.owner.stop()
    print(f"stopped the World of {world.np} ranks" if world else "no World running")


def keep(context, options) -> None:
    context.owner.keep(True, notice=context.notice)


def no_keep(context, options) -> None:
    context.owner.keep(False, notice=context.notice)


def attach(context, options) -> None:
    world = context.owner.attach(options.world_id, options.force, notice=context.notice)
    print(f"attached to {world.describe()}")


def restart(context, options) -> None:
    owner = context.owner
    print(owner.ensure(wanted_spec(options, context.env, owner.world), restart=True,
                       notice=context.notice).describe())


def stacks(context, options) -> None:
    """Every rank's Python stack, merged into one tree."""
    world = context.owner.world
    if world is None:
        raise MlpMagicError("%mpirun --stacks: no World running")
    text, html = stack_snapshot(world, [row.rank for row in world.layout], logs.new_cell_dir(options.log_dir))
    context.show(text, html)
