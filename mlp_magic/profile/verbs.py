"""``%%mpirun --profile``: the cell runs as any cell while py-spy samples every rank from outside
(profile/rank/sampler: each rank starts its own, on its own host), then the report says where
each group of ranks spent the cell and which rank the others waited for (profile/pure/report).

The samplers start before the cell, and a rank where py-spy cannot sample refuses the whole
profile in one line: no cell half-runs. They stop after the cell however it ended (an error, a
timeout, Ctrl-C); a rank still running then keeps its sampler until its cell ends, and the
report names it.
"""
from __future__ import annotations

import html
import os
import secrets
import time

from mlp_magic.client.job import CHORE, RankJob, call
from mlp_magic.client.remote_errors import Failed
from mlp_magic.core.ranges import by_message
from mlp_magic.engine.private_files import private_dirs, write_private
from mlp_magic.errors import MlpMagicError, RankFailure
from mlp_magic.machine.programs import find_pyspy
from mlp_magic.mpirun.plan import chosen_ranks, live_ranks, wanted_spec
from mlp_magic.mpirun.run import run_cell
from mlp_magic.mpirun.verbs import keep_result
from mlp_magic.profile.pure.picture import report_html
from mlp_magic.profile.pure.report import default_rate, found, rate_note
from mlp_magic.profile.pure.speedscope import speedscope_json
from mlp_magic.profile.rank import sampler

START_TIMEOUT_S = sampler.START_WAIT_S + 25.0   # a rank's answer: py-spy's start, and a busy host
STOP_TIMEOUT_S = sampler.STOP_WAIT_S + 5.0
SPEEDSCOPE_FILE = "ranks.speedscope.json"


def profile(context, options) -> None:
    """Run the cell with every rank sampled; the report after the cell's output; ``-o NAME``
    keeps the cell's result with its ``profile`` (report.Found)."""
    world, ranks = _world_and_ranks(context, options)
    token = secrets.token_hex(6)
    rate = options.rate or default_rate(world.ranks_per_cpu)
    note = "" if options.rate else rate_note(rate, world.ranks_per_cpu)
    _start_samplers(world, ranks, token, rate, bool(options.native))
    began = time.monotonic()
    failure = None
    try:
        result = run_cell(context.owner, options, context.cell, context.env, notice=context.notice,
                          world=world)
    except RankFailure as err:
        failure, result = err, err.result
    finally:   # an error, Ctrl-C: the samplers stop all the same
        answers = _stop_samplers(world, ranks, token)
    report = found({rank: a["raw"] for rank, a in answers.items() if "raw" in a},
                   {rank: a["entered"] for rank, a in answers.items() if "raw" in a},
                   {rank: a["error"] for rank, a in answers.items() if "raw" not in a},
                   rate, time.monotonic() - began)
    folder = _write_samples(report, result.log_dir)
    saved = (f"the samples: {folder}/{SPEEDSCOPE_FILE} (every rank, for speedscope), rank-N.txt "
             "(collapsed stacks, for flamegraph.pl)")
    after = "\n".join(line for line in (note, saved) if line)
    context.show(f"{report.text}\n{after}", f"{report_html(report)}<pre>{html.escape(after)}</pre>")
    world.live.profiled(report.lines, report.straggler, folder)   # the panel shows the last one
    result.profile = report
    keep_result(context, options, result)
    if failure is not None:
        raise failure


def _write_samples(report, log_dir: str) -> str:
    """The ranks' samples in the cell's log folder: all in one speedscope file, and each rank's as
    collapsed stacks; the folder."""
    folder = private_dirs(os.path.join(log_dir, "profile"))
    name = f"%%mpirun --profile, {os.path.basename(log_dir)}"
    write_private(os.path.join(folder, SPEEDSCOPE_FILE), speedscope_json(report.stacks, report.rate, name))
    for rank in report.stacks:
        write_private(os.path.join(folder, f"rank-{rank}.txt"), report.collapsed(rank))
    return folder


def _world_and_ranks(context, options) -> tuple:
    """The World the cell runs on (started if need be) and its live ranks, as a cell plans them."""
    owner = context.owner
    spec = wanted_spec(options, context.env, owner.world)
    ranks = chosen_ranks(options.ranks, spec.np)   # a bad --ranks starts nothing
    world = owner.ensure(spec, notice=context.notice)
    ranks = live_ranks(world, ranks, bool(options.ranks), context.notice)
    return owner.idle_world(world, context.notice), ranks


def _start_samplers(world, ranks: list, token: str, rate: int, native: bool) -> None:
    """py-spy sampling every rank; one MlpMagicError where a rank's cannot (the others stopped)."""
    answers = call(world, ranks, sampler.start, token, rate, native, find_pyspy(),
                   timeout=START_TIMEOUT_S, what="%%mpirun --profile: starting py-spy on the ranks")
    failed = {rank: answer.message if isinstance(answer, Failed) else answer["error"]
              for rank, answer in answers.items() if isinstance(answer, Failed) or "error" in answer}
    if failed:
        started = [rank for rank in ranks if rank not in failed]
        if started:
            call(world, started, sampler.stop, token, timeout=STOP_TIMEOUT_S, what="stopping py-spy")
        raise MlpMagicError(f"%%mpirun --profile: {by_message(failed)}; the cell did not run")


def _stop_samplers(world, ranks: list, token: str) -> dict:
    """{rank: its sampler's answer}: the samples, or {"error"}; a rank still running the cell
    answers later (its sampler stops then), and is said to be so; a dead rank's py-spy ended
    with it."""
    if world.lifeline_ended():
        return {rank: {"error": "not sampled: the World ended in the cell"} for rank in ranks}
    dead = {rank: {"error": "not sampled: it died in the cell"} for rank in ranks if rank in world.dead_ranks}
    ranks = [rank for rank in ranks if rank not in dead]
    if not ranks:
        return dead
    stopping = RankJob.apply(world, CHORE, ranks, sampler.stop, token)
    finished = stopping.wait_all(time.monotonic() + STOP_TIMEOUT_S)
    answers = stopping.answers()
    for rank in ranks:
        answer = answers.get(rank)
        if isinstance(answer, Failed):
            answers[rank] = {"error": f"not sampled: {answer.message}"}
        elif answer is None:
            answers[rank] = {"error": "not sampled: still running when the cell ended"}
    if finished:
        stopping.release()
    return {**answers, **dead}
