"""``%mpirun script.py``, ``%mpirun --where`` and ``%%mpirun --post-mortem``: each checked, then
run as an ordinary cell, so its output is streamed, grouped, logged and kept with ``-o``."""
from __future__ import annotations

import copy

from mlp_magic.debugging.prepare import inspection_cell, script_cell
from mlp_magic.mpirun.verbs import run_and_keep


def script(context, options) -> None:
    options, code = script_cell(context.owner, options, context.env, context.notice)
    run_and_keep(context, options, code)


def where(context, options) -> None:
    _inspect(context, options, None)


def post_mortem(context, options) -> None:
    _inspect(context, options, context.cell or "")


def _inspect(context, options, cell) -> None:
    """On the running World, as it is: its ranks with a failure to look at (or ``--ranks``)."""
    ranks, code = inspection_cell(context.owner, options, cell)
    options = copy.copy(options)
    options.ranks = ranks
    run_and_keep(context, options, code, world=context.owner.world)
