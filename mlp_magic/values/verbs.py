"""``%mpirun --compare EXPR``, ``--pull NAME`` and ``--push NAME`` on the running World's ranks."""
from __future__ import annotations

from mlp_magic import config
from mlp_magic.core.ranges import parse_ranks
from mlp_magic.debugging.stopped import ByControl, chosen_ranks, stopped_cell
from mlp_magic.errors import MlpMagicError
from mlp_magic.values import compare as comparing
from mlp_magic.values import transfer


def _idle_world_and_ranks(context, options) -> tuple:
    world = context.owner.world
    if world is None:
        raise MlpMagicError("%mpirun --compare/--pull/--push: no World running (a %%mpirun cell starts one)")
    context.owner.idle_world(world)
    return world, parse_ranks(options.ranks, world.np) if options.ranks else list(range(world.np))


def compare(context, options) -> None:
    """The grouped comparison is printed; ``-o NAME`` keeps the Comparison. Ranks stopped at a
    breakpoint compare in their frames (on their control channel: debugging/stopped)."""
    comparing.check_expression(options.expression)   # a syntax error runs nothing
    stopped = stopped_cell(context.owner.world)
    if stopped is not None:
        world, ranks, reach = stopped.world, chosen_ranks(stopped, options.ranks), ByControl(stopped)
    else:
        (world, ranks), reach = _idle_world_and_ranks(context, options), None
    found = comparing.compare(world, options.expression, ranks, options.timeout, reach=reach)
    context.store(options.out, found)
    print(found.text)


def pull(context, options):
    """{rank: value} is the line's value (``d = %mpirun --pull x``), or goes to ``-o NAME``."""
    world, ranks = _idle_world_and_ranks(context, options)
    values = transfer.pull(world, options.name, ranks, config.pull_cap(context.env), options.timeout)
    if not options.out:
        return values
    context.store(options.out, values)
    print(f"{options.out} = {{rank: {options.name}}} from {len(values)} ranks")
    return None


def push(context, options) -> None:
    world, ranks = _idle_world_and_ranks(context, options)
    line = transfer.push(world, options.name, context.user_ns, ranks, config.pull_cap(context.env),
                         options.timeout)
    context.store(options.out, line)
    print(line)
