"""Show a running cell's output live, then replace it with the grouped summary.

In a notebook the live tail (the last lines, tagged by rank) sits in one display area that
is updated at most every ``interval`` seconds and finally replaced by the grouped output. In
a terminal, lines are printed as they come and the summary follows.
"""
from __future__ import annotations

import sys
import time
from collections import deque

from IPython import get_ipython
from IPython.display import display


def in_notebook() -> bool:
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class LiveOutput:
    def __init__(self, max_lines: int = 40, interval: float = 0.25):
        self.notebook = in_notebook()
        self.lines: deque = deque(maxlen=max_lines)
        self.interval = interval
        self.handle = None
        self._last_update = 0.0
        self._dirty = False
        self._partial: dict = {}

    def add(self, chunks: list) -> None:
        for rank, stream, text in chunks:
            for line in self._complete_lines(rank, stream, text):
                tag = f"[{rank}]" if stream == "stdout" else f"[{rank}:err]"
                self._emit(f"{tag} {line}")
        self._refresh()

    def _complete_lines(self, rank: int, stream: str, text: str) -> list:
        """Whole lines only; a partial line waits for its end (per rank and stream)."""
        key = (rank, stream)
        pieces = (self._partial.pop(key, "") + text).split("\n")
        if pieces[-1]:
            self._partial[key] = pieces[-1]
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
        if not force and now - self._last_update < self.interval:
            return
        bundle = {"text/plain": "\n".join(self.lines)}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)
        self._last_update, self._dirty = now, False

    def finish(self, bundle: dict) -> None:
        """Replace the live area (if any) with the final bundle."""
        if self.handle is not None:
            self.handle.update(bundle, raw=True)
        elif self.notebook:
            display(bundle, raw=True)
        else:
            sys.stdout.write(bundle.get("text/plain", "") + "\n")
            sys.stdout.flush()
