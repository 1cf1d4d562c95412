"""``%mpirun script.py``, ``%mpirun --where`` and ``%%mpirun --post-mortem``: checked here, in the
kernel, before anything runs; then each is an ordinary cell (``command.run_cell``) whose code
calls into ``engine.script`` or ``engine.postmortem`` on the ranks, so its output is streamed,
grouped, logged and stored with ``-o`` like any cell's.
"""
from __future__ import annotations

import dataclasses
import os
import time

from mlp_magic.debugging.pure.postmortem import choose_ranks
from mlp_magic.core.ranges import fold_hosts, fold_ranks, parse_ranks
from mlp_magic.debugging.rank.postmortem import GENERATED_TAG, INSPECT_TAG, failure_summary
from mlp_magic.debugging.rank.script import script_problem
from mlp_magic.errors import MlpMagicError
from mlp_magic.mpirun import command
from mlp_magic.mpirun.args import MpirunArgs
from mlp_magic.ranks.ipp_private import children
from mlp_magic.ranks.waiting import Requests

ASK_SECONDS = 10.0            # for a quick question to idle ranks...
ASK_SECONDS_PER_RANK = 0.05   # ... plus this per rank sharing the busiest host


def prepare(args: MpirunArgs, cell: str | None, env, notice=print) -> tuple:
    """(args, the code the ranks run): for a script, --where and --post-mortem, the generated
    cell and the ranks it runs on; any other cell as it is."""
    if args.script:
        return _script_cell(args, env, notice)
    if args.where or args.post_mortem:
        return _inspection_cell(args, cell or "")
    return args, cell


def _call(module: str, function: str, *arguments) -> str:
    """One expression calling ``mlp_magic.<module>.<function>(*arguments)``; it binds no name in
    the rank's namespace."""
    listed = ", ".join(repr(a) for a in arguments)
    return f"__import__('mlp_magic.{module}', fromlist=['{function}']).{function}({listed})\n"


# ------------------------------------------------------------------------------ a script
def _script_cell(args: MpirunArgs, env, notice) -> tuple:
    path = os.path.abspath(os.path.expanduser(args.script))   # against the notebook's folder
    spec = command.wanted_spec(args, env)
    if spec.topology.is_local:
        problem = script_problem(path)
        if problem:
            shown = args.script if path == args.script else f"{args.script} ({path})"
            raise MlpMagicError(f"%mpirun: script {shown}: {problem}; nothing was run")
    else:   # the ranks' own file systems decide
        world = command.ensure_world(spec, restart=args.restart, notice=notice)
        args = dataclasses.replace(args, restart=False)
        ranks = parse_ranks(args.ranks, world.np) if args.ranks else list(range(world.np))
        _refuse_missing_on_ranks(world, ranks, path)
    code = f"{GENERATED_TAG}script\n" + _call("debugging.rank.script", "run_script", path,
                                              [args.script, *args.script_args])
    return args, code


def _refuse_missing_on_ranks(world, ranks: list, path: str) -> None:
    command.refuse_if_stuck(world)
    problems = {}
    for rank, problem in ask_ranks(world, ranks, script_problem, path).items():
        if problem:
            problems.setdefault(problem, []).append(rank)
    if problems:
        parts = [f"{problem} on ranks {fold_ranks(bad)} ({_hosts(world, bad)})"
                 for problem, bad in sorted(problems.items())]
        raise MlpMagicError(f"%mpirun: script {path}: {'; '.join(parts)}; nothing was run")


def _hosts(world, ranks: list) -> str:
    return fold_hosts(dict.fromkeys(world.host_of(rank) for rank in ranks))


# ------------------------------------------------------------------------------ inspections
def _inspection_cell(args: MpirunArgs, cell: str) -> tuple:
    option = "%%mpirun --post-mortem" if args.post_mortem else "%mpirun --where"
    world = command.current_world()
    if world is None:
        raise MlpMagicError(f"{option}: no World running, so no rank has a failure to inspect")
    command.refuse_if_stuck(world)
    requested = parse_ranks(args.ranks, world.np) if args.ranks else None
    frame = (args.frame or 0) if args.post_mortem else None
    summaries = ask_ranks(world, list(range(world.np)), failure_summary)   # all: to name those with one
    counts = {rank: None if summary is None else summary["frames"] for rank, summary in summaries.items()}
    ranks = choose_ranks(option, requested, counts, frame)
    if args.post_mortem:
        _refuse_bad_syntax(option, cell)
        code = _call("debugging.rank.postmortem", "run_in_frame", cell, frame)
    else:
        code = _call("debugging.rank.postmortem", "print_where")
    return dataclasses.replace(args, ranks=fold_ranks(ranks)), f"{INSPECT_TAG}\n{code}"


def _refuse_bad_syntax(option: str, cell: str) -> None:
    try:
        compile(cell, "<post-mortem>", "exec", dont_inherit=True)
    except SyntaxError as err:
        raise MlpMagicError(f"{option}: line {err.lineno} of the cell: {err.msg}") from None
    except ValueError as err:   # null bytes
        raise MlpMagicError(f"{option}: the cell cannot be compiled: {err}") from None


def ask_ranks(world, ranks: list, function, *arguments) -> dict:
    """{rank: function(*arguments) as run on that rank}: one broadcast request; ranks that do not
    answer in time (busy with something else) are named in one error."""
    view = world.client.broadcast_view(targets=[world.rank_to_engine[r] for r in ranks])
    asked = view.apply_async(function, *arguments)
    requests = Requests(world, ranks, [[child] for child in children(asked)])
    patience = ASK_SECONDS + ASK_SECONDS_PER_RANK * world.busiest_host_ranks
    if not requests.wait_all(time.monotonic() + patience):
        raise MlpMagicError(f"ranks {fold_ranks(requests.unfinished())} did not answer (busy? "
                            "`%mpirun --stacks` shows where they are)")
    return dict(zip(ranks, asked.get(0)))
