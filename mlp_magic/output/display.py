"""Show a running cell's output as it streams, then replace it with the grouped summary.

In a notebook the streaming tail (the last lines, tagged by rank) sits in one display area that
is updated at most every ``interval`` seconds and finally replaced by the grouped output (text,
and HTML). In a terminal, lines are printed as they come and the summary follows. With ``fold``
(``%%mpirun``'s default) lines are folded by template as they come (output/pure/fold/streaming): the
notebook shows one line per template, a terminal the first line of each template and then its
repeats at most every 2 s, so 512 ranks stream a bounded number of lines. The summary folds
outputs that differ only in numbers (output/pure/fold/groups). The rich outputs of the ranks (``display()``,
plots, the last value) sit below the area: mpirun/forwarded_displays shows them as they come (in a
notebook) and as they stand at the end.
"""
from __future__ import annotations

import html
import sys
import time
from collections import deque

from IPython import get_ipython
from IPython.display import display

from mlp_magic.output.pure.fold.groups import fold_groups
from mlp_magic.output.pure.fold.streaming import StreamingFold
from mlp_magic.output.pure.grouping import fold_hosts_shown, group_results, ranks_label
from mlp_magic.output.pure.html import render_groups_html
from mlp_magic.output.pure.progress import ProgressBoard, current_piece, parse_bar
from mlp_magic.stacks.pure.render import collectives_html, merged_html, merged_text
from mlp_magic.output.pure.text import render_groups_text
from mlp_magic.stacks.pure.tree import merge

BARS_INTERVAL = 0.5   # while bars move, the notebook's area changes at most twice a second
BARS_PRINTED_EVERY = 2.0   # a terminal prints the bars' lines at most this often
STACKS_TITLE = ("Where each rank is (main thread's Python stack, merged across ranks; "
                "--> marks the innermost line of your code)")


def in_notebook() -> bool:
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class StreamingOutput:
    def __init__(self, max_lines: int = 40, interval: float = 0.25, fold: bool = False):
        self.notebook = in_notebook()
        self.lines: deque = deque(maxlen=max_lines)
        self.interval = interval
        self.handle = None
        self._last_update = 0.0
        self._dirty = False
        self._partial: dict = {}
        self.folded = StreamingFold() if fold else None
        self.bars = ProgressBoard()   # the ranks' progress bars, one line per kind (output/pure/progress)
        self._bars_changed, self._bars_printed = False, 0.0

    def add(self, chunks: list, bars: list = ()) -> None:
        """What the ranks wrote ([(rank, stream, text)]), and the bars their widgets moved to
        ([(rank, Bar)]: mpirun/rank_displays)."""
        for rank, bar in bars:
            self._take(rank, bar)
        for rank, stream, text in chunks:
            for line in self._complete_lines(rank, stream, text):
                if "\r" in line:   # a line the rank rewrote: what a terminal shows is its last piece
                    line = current_piece(line)
                    if self._took_bar(rank, line):
                        continue
                if self.folded is not None:
                    self._fold(rank, stream, line)
                    continue
                tag = f"[{rank}]" if stream == "stdout" else f"[{rank}:err]"
                self._emit(f"{tag} {line}")
        if self.folded is not None and not self.notebook:
            for shown in self.folded.due(time.monotonic()):
                self._emit(shown)
        self._print_bars()
        self._refresh()

    def _took_bar(self, rank: int, piece: str) -> bool:
        """Whether ``piece`` is a progress bar, now the rank's latest of its kind."""
        bar = parse_bar(piece)
        if bar is not None:
            self._take(rank, bar)
        return bar is not None

    def _take(self, rank: int, bar) -> None:
        self.bars.update(rank, bar)
        self._bars_changed = self._dirty = True

    def _print_bars(self, force: bool = False) -> None:
        """A terminal's bars: their lines when they moved, at most every ``BARS_PRINTED_EVERY``."""
        now = time.monotonic()
        if self.notebook or not self._bars_changed or (not force and now < self._bars_due()):
            return
        self._bars_changed, self._bars_printed = False, now
        for line in self.bars.lines():
            sys.stdout.write(line + "\n")

    def _bars_due(self) -> float:
        return self._bars_printed + BARS_PRINTED_EVERY

    def wake_at(self) -> float | None:
        """The monotonic time at which what came already is due on screen (it waits for the
        display's interval, or a folded line's repeat), so the caller's wait ends then; None:
        nothing is waiting."""
        if self.notebook:
            return self._last_update + self._interval() if self._dirty else None
        due = [self.folded.next_due() if self.folded is not None else None,
               self._bars_due() if self._bars_changed else None]
        return min((t for t in due if t is not None), default=None)

    def _interval(self) -> float:
        return max(self.interval, BARS_INTERVAL) if self.bars else self.interval

    def _fold(self, rank: int, stream: str, line: str) -> None:
        for shown in self.folded.add(rank, stream, line, time.monotonic()):
            if not self.notebook:
                self._emit(shown)
        if self.notebook:
            self._dirty = True

    def _complete_lines(self, rank: int, stream: str, text: str) -> list:
        """Whole lines only; a partial line waits for its end (per rank and stream). Of a partial
        line the rank rewrites (``\\r``: a progress bar) only its last piece is kept, and read."""
        key = (rank, stream)
        pieces = (self._partial.pop(key, "") + text).split("\n")
        partial = pieces[-1]
        if "\r" in partial:
            partial = "\r" + current_piece(partial)
            self._took_bar(rank, partial[1:])
        if partial:
            self._partial[key] = partial
        return pieces[:-1]

    def _emit(self, line: str) -> None:
        if self.notebook:
            self.lines.append(line)
            self._dirty = True
        else:
            sys.stdout.write(line + "\n")

    def _refresh(self, force: bool = False) -> None:
        if not (self.notebook and self._dirty):
            return
        now = time.monotonic()
        if not force and now - self._last_update < self._interval():
            return
        shown = self.folded.view(self.lines.maxlen) if self.folded is not None else list(self.lines)
        bundle = {"text/plain": "\n".join([*shown, *self.bars.lines()])}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)
        self._last_update, self._dirty = now, False

    def show_area(self) -> None:
        """The streaming area on screen now, empty if nothing came yet: what a rank displays while
        the cell runs shows below it (mpirun/forwarded_displays)."""
        if self.notebook and self.handle is None:
            self.handle = display({"text/plain": ""}, raw=True, display_id=True)

    def finish(self, bundle: dict) -> None:
        """Replace the streaming area (if any) with the final bundle."""
        if self.handle is not None:
            self.handle.update(bundle, raw=True)
        elif self.notebook:
            display(bundle, raw=True)
        else:
            sys.stdout.write(bundle.get("text/plain", "") + "\n")
            sys.stdout.flush()


def summary(results: list, *, group: bool, diff: bool, footer: str, html_too: bool,
            stack_report: tuple | None = None, fold: bool = False, follows: dict | None = None) -> dict:
    """The grouped output as a mime bundle: text always, HTML for a notebook; ``stack_report``
    (text, html) follows the groups. ``fold`` folds outputs that differ in numbers (not with
    ``diff``, which compares exact texts, nor without ``group``); ``follows``: fold_groups'."""
    if not group:
        groups = [group_results([r]) for r in results]
    elif fold and not diff:
        groups = [fold_groups(group_results(results), follows=follows)]
    else:
        groups = [group_results(results)]
    text = "".join(render_groups_text(g, diff=diff) for g in groups)
    if stack_report:
        text = f"{text.rstrip()}\n{stack_report[0]}"
    bundle = {"text/plain": f"{text.rstrip()}\n{footer}" if text.strip() else footer}
    if html_too:
        markup = "".join(render_groups_html(g, diff=diff) for g in groups)
        markup += stack_report[1] if stack_report else ""
        bundle["text/html"] = f"{markup}{footnote_html(footer)}"
    return bundle


def rank_maps(layout: list) -> dict:
    """What a folded field may follow besides the rank: {"local_rank": {rank: n}, "node_rank": ...}."""
    return {"local_rank": {row.rank: row.local_rank for row in layout},
            "node_rank": {row.rank: row.node_rank for row in layout}}


def footer(results: list, cell_dir: str, note: str, all_outputs: bool = True) -> str:
    """ "4 ranks | 0.12 s | logs: DIR", after the note saying how the cell ended, if any; whose
    rich outputs show when only the lowest rank's do (``all_outputs`` False) and others had some."""
    durations = [r.duration for r in results if r.duration is not None]
    took = f"{max(durations):.2f} s" if durations else "-"
    parts = [f"{len(results)} ranks", took, f"logs: {cell_dir}"]
    lowest = min((r.rank for r in results), default=None)
    if not all_outputs and any(_has_rich_output(r) for r in results if r.rank != lowest):
        parts.insert(2, f"outputs: rank {lowest}'s (--all-outputs: every rank's)")
    return ("mlp_magic: " + note + "\n" if note else "") + " | ".join(parts)


def footnote_html(text: str) -> str:
    return f"<div style='color:#777;font-size:85%'>{html.escape(text).replace(chr(10), '<br>')}</div>"


def stack_report(stacks: dict, hosts: dict, where: str, collectives: list = ()) -> tuple:
    """Every rank's stack ({rank: frames}) merged into one tree (``stacks/pure/tree``), the odd ranks
    named, then the ``collectives`` lines (``stacks/pure/collectives``: none without a process
    group), as (text, html); ``hosts``: {rank: host}; ``where``: the full dumps."""
    root = merge(stacks)

    def label(ranks) -> str:
        ranks = sorted(ranks)
        return ranks_label(ranks, fold_hosts_shown(hosts[r] for r in ranks))

    beside = "".join(f"{line}\n" for line in collectives)
    text = f"\n{STACKS_TITLE}\n{merged_text(root, label)}{beside}{where}\n"
    markup = (f"<div style='margin-top:0.8em;font-weight:bold'>{html.escape(STACKS_TITLE)}</div>"
              f"{merged_html(root, label)}{collectives_html(collectives)}{footnote_html(where)}")
    return text, markup


def _has_rich_output(result) -> bool:
    return any(output.get("data") for output in result.displays)
