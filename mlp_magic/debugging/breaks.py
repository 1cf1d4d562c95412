"""``%mpirun --break FILE:LINE [--ranks SPEC] [--if EXPR]`` and ``--break clear``: breakpoints set on
the ranks before a cell runs (debugging/rank/breakpoints keeps them; each later cell runs traced
until they are cleared). ``cell:LINE`` stops at that line of any cell."""
from __future__ import annotations

from mlp_magic.core.ranges import parse_ranks, quote, rank_words
from mlp_magic.debugging.rank import breakpoints as on_rank
from mlp_magic.errors import MlpMagicError
from mlp_magic.client.job import call
from mlp_magic.client.remote_errors import Failed

WHAT = "%mpirun --break"


def set_break(context, options) -> None:
    world = context.owner.world
    if world is None:
        raise MlpMagicError(f"{WHAT}: no World running: breakpoints are set on a World's ranks "
                            "(a %%mpirun cell starts one)")
    context.owner.idle_world(world)
    if options.name == "clear":
        if options.ranks or options.condition:
            raise MlpMagicError(f"{WHAT} clear clears every rank's breakpoints: it takes no --ranks or --if")
        cleared = call(world, list(range(world.np)), on_rank.clear_breaks, what=WHAT)
        print(f"cleared {max(cleared.values(), default=0)} breakpoint(s) on every rank")
        return
    file, line = options.name
    condition = _checked(options.condition)
    ranks = parse_ranks(options.ranks, world.np) if options.ranks else list(range(world.np))
    answers = call(world, ranks, on_rank.add_break, file, line, condition, what=WHAT)
    refused = {rank: answer.message if isinstance(answer, Failed) else answer
               for rank, answer in answers.items() if answer}
    if refused:
        rank, why = min(refused.items())
        raise MlpMagicError(f"{WHAT} {file}:{line}: {why} ({rank_words(sorted(refused))})")
    when = f" where {condition}" if condition else ""
    print(f"breakpoint at {file}:{line} on {rank_words(ranks)}{when}, from the next cell on "
          "(`%mpirun --break clear` removes it)")


def _checked(condition: str | None) -> str | None:
    """The ``--if`` expression, compiled here first: a syntax error is one line, nothing is set."""
    if condition is None:
        return None
    try:
        compile(condition, "<--if>", "eval")
    except (SyntaxError, ValueError) as error:
        raise MlpMagicError(f"{WHAT} --if {quote(condition)}: {getattr(error, 'msg', error)}; "
                            "nothing was set") from None
    return condition
