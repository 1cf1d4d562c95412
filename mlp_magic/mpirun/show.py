"""The end of a ``%%mpirun`` cell: its logs' summary, the grouped and folded output, -o's result.

The live tail the cell showed while it ran is replaced by the summary (output/display); the
footer says how the cell ended; a rank that did not succeed raises RankFailure after the summary
is on screen, carrying the same result ``-o NAME`` keeps.
"""
from __future__ import annotations

from mlp_magic.core import results as status
from mlp_magic.core.ranges import fold_ranks, rank_words
from mlp_magic.core.results import MpirunResult
from mlp_magic.errors import RankFailure
from mlp_magic.mpirun.cell import Cell, Outcome
from mlp_magic.output import display, logs
from mlp_magic.unblock.pure.report import HUNG_HINT


def show(cell: Cell, code: str, results: list, args, live: display.LiveOutput, stacks) -> MpirunResult:
    """Write the summary, replace the live tail with the grouped output; the cell's result."""
    summary = logs.write_summary(cell.log_dir, code, results, {"outcome": cell.outcome.value})
    footer = display.footer(results, cell.log_dir, outcome_note(cell))
    bundle = display.summary(results, group=args.group, diff=args.diff, footer=footer,
                             html_too=live.notebook, stack_report=stacks, fold=args.fold,
                             follows=display.rank_maps(cell.world.layout))
    live.finish(bundle)
    display.publish_rich_outputs(results, args.all_outputs)
    return MpirunResult(results, cell.log_dir, summary, bundle["text/plain"], bundle.get("text/html", ""))


def outcome_note(cell: Cell) -> str:
    """The footer's word on a cell that did not simply end: timed out, interrupted, died."""
    if cell.outcome is Outcome.DONE:
        return ""
    if cell.outcome in (Outcome.DIED, Outcome.HOST_LOST):
        return cell.death_note or "ranks died during the cell; `%mpirun --restart` starts a new World"
    what = "timed out" if cell.outcome is Outcome.TIMEOUT else "interrupted"
    if cell.still_running:
        return (f"{what}: {rank_words(cell.still_running)} did not stop on SIGINT (blocked in a C "
                f"call?); {HUNG_HINT}")
    return f"{what}: the running ranks were interrupted; the World is still usable"


def raise_for_failures(result: MpirunResult) -> None:
    failed = [r for r in result.results if r.status != status.OK]
    if failed:
        kinds = sorted({r.status for r in failed})
        raise RankFailure(f"{' / '.join(kinds)} on ranks {fold_ranks(r.rank for r in failed)} "
                          f"({len(failed)} of {len(result)}); details above", result)
