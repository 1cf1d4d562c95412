"""``%mpirun script.py``, ``%mpirun --where`` and ``%%mpirun --post-mortem``, checked here, in the
kernel, before anything runs: each becomes the code of an ordinary cell, which calls into
``debugging/rank/script`` or ``debugging/rank/postmortem`` on the ranks (debugging/verbs runs it).
"""
from __future__ import annotations

import copy
import os

from mlp_magic.debugging.pure.postmortem import choose_ranks
from mlp_magic.core.ranges import fold_hosts, fold_ranks, parse_ranks
from mlp_magic.debugging.rank.postmortem import failure_summary
from mlp_magic.engine.bootstrap import GENERATED_TAG, INSPECT_TAG
from mlp_magic.debugging.rank.script import script_problem
from mlp_magic.errors import MlpMagicError
from mlp_magic.mpirun.plan import chosen_ranks, wanted_spec
from mlp_magic.client.job import call
from mlp_magic.client.remote_errors import Failed

ASK_SECONDS = 10.0            # for a quick question to idle ranks...
ASK_SECONDS_PER_RANK = 0.05   # ... plus this per rank sharing the busiest host


def _call(module: str, function: str, *arguments) -> str:
    """One expression calling ``mlp_magic.<module>.<function>(*arguments)``; it binds no name in
    the rank's namespace."""
    listed = ", ".join(repr(a) for a in arguments)
    return f"__import__('mlp_magic.{module}', fromlist=['{function}']).{function}({listed})\n"


# ------------------------------------------------------------------------------ a script
def script_cell(owner, args, env, notice) -> tuple:
    """(the options the cell runs with, its code): ``args.script`` run on every rank."""
    path = os.path.abspath(os.path.expanduser(args.script))   # against the notebook's folder
    spec = wanted_spec(args, env, owner.world)
    if spec.topology.is_local:
        problem = script_problem(path)
        if problem:
            shown = args.script if path == args.script else f"{args.script} ({path})"
            raise MlpMagicError(f"%mpirun: script {shown}: {problem}; nothing was run")
    else:   # the ranks' own file systems decide
        world = owner.idle_world(owner.ensure(spec, restart=args.restart, notice=notice), notice)
        args = copy.copy(args)
        args.restart = False
        _refuse_missing_on_ranks(world, chosen_ranks(args.ranks, world.np), path)
    code = f"{GENERATED_TAG}script\n" + _call("debugging.rank.script", "run_script", path,
                                              [args.script, *args.script_args])
    return args, code


def _refuse_missing_on_ranks(world, ranks: list, path: str) -> None:
    problems = {}
    answers = ask_ranks(world, ranks, "%mpirun: checking the script", script_problem, path)
    for rank, problem in answers.items():
        if problem:
            problems.setdefault(problem, []).append(rank)
    if problems:
        parts = [f"{problem} on ranks {fold_ranks(bad)} ({_hosts(world, bad)})"
                 for problem, bad in sorted(problems.items())]
        raise MlpMagicError(f"%mpirun: script {path}: {'; '.join(parts)}; nothing was run")


def _hosts(world, ranks: list) -> str:
    return fold_hosts(dict.fromkeys(world.host_of(rank) for rank in ranks))


# ------------------------------------------------------------------------------ inspections
def inspection_cell(owner, args, cell: str | None) -> tuple:
    """(the ranks it runs on, its code): ``--where`` (``cell`` None) or ``--post-mortem``."""
    post_mortem = cell is not None
    option = "%%mpirun --post-mortem" if post_mortem else "%mpirun --where"
    if owner.world is None:
        raise MlpMagicError(f"{option}: no World running, so no rank has a failure to inspect")
    world = owner.idle_world(owner.world)
    requested = parse_ranks(args.ranks, world.np) if args.ranks else None
    frame = (args.frame or 0) if post_mortem else None
    # every rank: to name those with one
    summaries = ask_ranks(world, list(range(world.np)), option, failure_summary)
    counts = {rank: None if summary is None else summary["frames"] for rank, summary in summaries.items()}
    ranks = choose_ranks(option, requested, counts, frame)
    if post_mortem:
        _refuse_bad_syntax(option, cell)
        code = _call("debugging.rank.postmortem", "run_in_frame", cell, frame)
    else:
        code = _call("debugging.rank.postmortem", "print_where")
    return fold_ranks(ranks), f"{INSPECT_TAG}\n{code}"


def _refuse_bad_syntax(option: str, cell: str) -> None:
    try:
        compile(cell, "<post-mortem>", "exec", dont_inherit=True)
    except SyntaxError as err:
        raise MlpMagicError(f"{option}: line {err.lineno} of the cell: {err.msg}") from None
    except ValueError as err:   # null bytes
        raise MlpMagicError(f"{option}: the cell cannot be compiled: {err}") from None


def ask_ranks(world, ranks: list, what: str, function, *arguments) -> dict:
    """{rank: function(*arguments) as run on that rank}: one broadcast request, for idle ranks a
    quick question; ranks that do not answer in time, or fail, are named in one error."""
    patience = ASK_SECONDS + ASK_SECONDS_PER_RANK * world.busiest_host_ranks
    answers = call(world, ranks, function, *arguments, timeout=patience, what=what)
    failed = {rank: answer.message for rank, answer in answers.items() if isinstance(answer, Failed)}
    if failed:
        rank, message = next(iter(failed.items()))
        raise MlpMagicError(f"{what}: rank {rank} failed: {message}")
    return answers
