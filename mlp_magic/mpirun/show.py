"""The end of a ``%%mpirun`` cell: its logs' summary, the grouped and folded output, -o's result.

The streaming tail the cell showed while it ran is replaced by the summary (output/display); the
footer says how the cell ended; a rank that did not succeed raises RankFailure after the summary
is on screen, carrying the same result ``-o NAME`` keeps.
"""
from __future__ import annotations

from mlp_magic.core import results as status
from mlp_magic.core.ranges import fold_ranks, rank_words
from mlp_magic.debugging.pure.stops import HINT, stops_text
from mlp_magic.core.results import MpirunResult
from mlp_magic.errors import RankFailure
from mlp_magic.mpirun.cell import Cell, Ending, Outcome
from mlp_magic.output import display, logs
from mlp_magic.unblock.pure.report import HUNG_HINT


def show(cell: Cell, code: str, results: list, args, live: display.StreamingOutput, stacks) -> MpirunResult:
    """Write the summary, replace the streaming tail with the grouped output; the cell's result.
    After its ranks stopped at a breakpoint, only what followed is shown (the log has it all)."""
    summary = logs.write_summary(cell.log_dir, code, results, {"outcome": cell.ending.outcome.value})
    shown = _since_paused(cell, results)
    footer = display.footer(shown, cell.log_dir, outcome_note(cell.ending), args.all_outputs)
    bundle = _bundle(cell, shown, footer, live, stacks)
    cell.forwarded.finish(shown)
    return MpirunResult(results, cell.log_dir, summary, bundle["text/plain"], bundle.get("text/html", ""))


def show_paused(cell: Cell, live: display.StreamingOutput) -> MpirunResult:
    """Every rank still running stopped at a breakpoint: the output so far, where they stopped,
    how to go on. The cell is not over: the World stays busy with it."""
    stopped = cell.paused_ranks()
    results = cell.results(unfinished_status=status.PAUSED)
    for result in results:
        if result.status == status.PAUSED and result.rank not in stopped:
            result.status = status.RUNNING   # not stopped: in a collective with the stopped ones?
    shown = _since_paused(cell, results)
    running = [r.rank for r in results if r.status == status.RUNNING]
    finished = [r.rank for r in shown if r.status not in (status.PAUSED, status.RUNNING)]
    note = f"{rank_words(sorted(stopped))} stopped at a breakpoint: {HINT}"
    if running:
        note += (f"; {rank_words(running)} still running (waiting in a collective for the stopped "
                 "ranks?): they go on once those do")
    text = stops_text(stopped, running=running, finished=finished)
    footer = f"{text}\n{display.footer(shown, cell.log_dir, note)}"
    said = [r for r in shown if r.stdout or r.stderr or r.status not in (status.PAUSED, status.RUNNING)]
    bundle = _bundle(cell, said, footer, live, None)
    cell.forwarded.finish([r for r in shown if r.rank in finished])   # not shown again at the end
    cell.world.live.flush()   # the record says paused when the cell returns, as it says idle at an end
    cell.mark_shown(finished)
    return MpirunResult(results, cell.log_dir, None, bundle["text/plain"], bundle.get("text/html", ""))


def _bundle(cell: Cell, results: list, footer: str, live: display.StreamingOutput, stacks) -> dict:
    args = cell.args
    bundle = display.summary(results, group=args.group, diff=args.diff, footer=footer,
                             html_too=live.notebook, stack_report=stacks, fold=args.fold,
                             follows=display.rank_maps(cell.world.layout))
    live.finish(bundle)
    return bundle


def _since_paused(cell: Cell, results: list) -> list:
    """The results as the notebook shows them now: the ranks whose end it showed already left
    out, the others' streams from where the last pause left them."""
    shown = []
    for result in results:
        if result.rank in cell.finished_shown:
            continue
        out, err = cell.shown_upto.get(result.rank, (0, 0))
        shown.append(result.replace(stdout=result.stdout[out:], stderr=result.stderr[err:])
                     if out or err else result)
    return shown


def outcome_note(ending: Ending) -> str:
    """The footer's word on a cell that did not simply end: timed out, interrupted, died."""
    if ending.quit:
        return "quit at the debugger: the stopped ranks' cells ended there; the World is still usable"
    if ending.outcome is Outcome.DONE:
        return ending.death_note   # ranks that failed in a collective with a dead one: why
    if ending.outcome in (Outcome.DIED, Outcome.HOST_LOST, Outcome.RANK_DIED):
        return ending.death_note or "ranks died during the cell; `%mpirun --restart` starts a new World"
    what = "timed out" if ending.outcome is Outcome.TIMEOUT else "interrupted"
    if ending.still_running:
        return (f"{what}: {rank_words(list(ending.still_running))} did not stop on SIGINT (blocked in a C "
                f"call?); {HUNG_HINT}")
    return f"{what}: the running ranks were interrupted; the World is still usable"


def raise_for_failures(result: MpirunResult) -> None:
    """RankFailure for a cell that ended with ranks that did not succeed (not while ranks are
    stopped at a breakpoint: the cell is not over)."""
    failed = [r for r in result.results if r.status not in (status.OK, status.QUIT)]   # q: the user's
    if failed and not any(r.status == status.PAUSED for r in failed):
        kinds = sorted({r.status for r in failed})
        raise RankFailure(f"{' / '.join(kinds)} on ranks {fold_ranks(r.rank for r in failed)} "
                          f"({len(failed)} of {len(result)}); details above", result)
