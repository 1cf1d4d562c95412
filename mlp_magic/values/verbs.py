"""``%mpirun --compare EXPR``, ``--pull NAME`` and ``--push NAME`` on the running World's ranks."""
from __future__ import annotations

from mlp_magic import config
from mlp_magic.core.ranges import parse_ranks
from mlp_magic.errors import MlpMagicError
from mlp_magic.values import compare, transfer


def values_command(owner, args, user_ns, env):
    """A Comparison, {rank: value}, or a line saying what was pushed."""
    if args.compare is not None:
        compare.check_expression(args.compare)   # a syntax error runs nothing
    world = owner.world
    if world is None:
        raise MlpMagicError("%mpirun --compare/--pull/--push: no World running (a %%mpirun cell starts one)")
    owner.idle_world(world)
    ranks = parse_ranks(args.ranks, world.np) if args.ranks else list(range(world.np))
    if args.compare is not None:
        return compare.compare(world, args.compare, ranks, args.timeout)
    if args.pull:
        return transfer.pull(world, args.pull, ranks, config.pull_cap(env), args.timeout)
    return transfer.push(world, args.push, user_ns, ranks, config.pull_cap(env), args.timeout)
