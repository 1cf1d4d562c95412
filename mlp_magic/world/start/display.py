"""The progress of a starting World, shown while its engines register.

In a notebook: an ipywidgets progress bar with the progress line beside it, closed when the start
ends. In a terminal: one line rewritten in place. Elsewhere (output captured to a file): a line
every ``LOG_EVERY_S``. Nothing for a start that ends within ``SHOW_AFTER_S`` (a 4-rank World),
and at most one update every ``EVERY_S`` however fast engines arrive.
"""
from __future__ import annotations

import sys
import time

from mlp_magic.output.display import in_notebook

SHOW_AFTER_S = 1.0
EVERY_S = 0.5
LOG_EVERY_S = 10.0


class StartProgress:
    def __init__(self, notebook: bool | None = None, stream=None):
        self.notebook = in_notebook() if notebook is None else notebook
        self.stream = stream or sys.stdout
        self.started = time.monotonic()
        self._shown_at = float("-inf")
        self._every = EVERY_S if self.notebook or _is_tty(self.stream) else LOG_EVERY_S
        self._bar = self._label = self._box = self._handle = None
        self._width = 0

    def __call__(self, line: str, registered: int, np: int) -> None:
        now = time.monotonic()
        if now - self.started < SHOW_AFTER_S or now - self._shown_at < self._every:
            return
        self._shown_at = now
        if self.notebook:
            self._show_widget(line, registered, np)
        elif _is_tty(self.stream):
            self.stream.write("\r" + line.ljust(self._width))
            self._width = max(self._width, len(line))
            self.stream.flush()
        else:
            self.stream.write(line + "\n")
            self.stream.flush()

    def wake_at(self) -> float:
        """When the next update may show (monotonic): the line's seconds move on with no event,
        so the start's wait wakes for them then (world/start/registration)."""
        return max(self.started + SHOW_AFTER_S, self._shown_at + self._every)

    def _show_widget(self, line: str, registered: int, np: int) -> None:
        if self._box is None:
            import ipywidgets
            from IPython.display import display

            self._bar = ipywidgets.IntProgress(min=0, max=np, description="ranks")
            self._label = ipywidgets.Label()
            self._box = ipywidgets.HBox([self._bar, self._label])
            self._handle = display(self._box, display_id=True)
        self._bar.value = registered
        self._label.value = line

    def close(self) -> None:
        """Remove what was shown: the started (or failed) message takes its place. In a notebook
        the output is replaced by empty text first, so a saved notebook keeps no dead widget."""
        if self._box is not None:
            self._handle.update({"text/plain": ""}, raw=True)
            self._box.close()
            self._box = None
        elif self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def _is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
