"""Run a blocking call in the background and wait for it no longer than a deadline.

The one helper behind every probe that must not hang its caller: a GPU driver that wedges, a
host that never answers, an event loop of port probes. The work runs in a daemon thread started
at once, so several can overlap; the caller waits for each until one shared monotonic deadline
and takes a default for whatever is late or failed. A late thread is left to finish on its own
(daemon: it never holds up the interpreter's exit).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

_MISSING = object()


class Pending:
    """The result of ``work()``, running in a thread started by ``in_background``."""

    def __init__(self, work: Callable, name: str):
        self._value = _MISSING
        self.error: BaseException | None = None
        # Waited on, not the thread: a Ctrl-C that interrupts Thread.join() marks a live thread
        # as ended in CPython 3.11 (gh-90882), and every later join returns at once.
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work: Callable) -> None:
        try:
            self._value = work()
        except BaseException as error:  # handed to the waiting thread, never lost in this one
            self.error = error
        finally:
            self._ended.set()

    def wait(self, deadline: float) -> bool:
        """Block until the work ended or ``deadline`` (``time.monotonic()``); True when it ended."""
        return self._ended.wait(max(0.0, deadline - time.monotonic()))

    def result(self, deadline: float, default=None):
        """The work's value, or ``default`` when it failed or had not ended by ``deadline``."""
        if not self.wait(deadline) or self.error is not None or self._value is _MISSING:
            return default
        return self._value


def in_background(work: Callable, name: str = "mlp-magic-background") -> Pending:
    return Pending(work, name)


def within(seconds: float, work: Callable, default=None):
    """``work()``'s value if it returns within ``seconds``, else (or if it fails) ``default``."""
    return in_background(work).result(time.monotonic() + seconds, default)
