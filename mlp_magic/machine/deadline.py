"""Run a blocking call in the background and wait for it no longer than a deadline.

The one helper behind every probe that must not hang its caller: a GPU driver that wedges, a
host that never answers, an event loop of port probes. The work runs in a daemon thread started
at once, so several can overlap; the caller waits for each until one shared monotonic deadline
and takes a default for whatever is late or failed. A late thread is left to finish on its own
(daemon: it never holds up the interpreter's exit).

``until`` is the one wait of ours that asks again and again: for what nothing announces (a file
another process writes, a log line, a lock held by a process that never says it let go). Every
other wait blocks on an event: a future's callback, a pid file descriptor, a blocking flock.
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
        """Block until the work ended or ``deadline`` (``time.monotonic()``, or ``math.inf``); True
        when it ended."""
        if deadline == float("inf"):
            return self._ended.wait()
        return self._ended.wait(max(0.0, deadline - time.monotonic()))

    def result(self, deadline: float, default=None):
        """The work's value, or ``default`` when it failed or had not ended by ``deadline``."""
        if not self.wait(deadline) or self.error is not None or self._value is _MISSING:
            return default
        return self._value


def in_background(work: Callable, name: str = "mlp-magic-background") -> Pending:
    return Pending(work, name)


def run_to_end(make: Callable, name: str = "mlp-magic-loop"):
    """``asyncio.run(make())`` from any thread: on this one when no event loop runs here (a script,
    a terminal IPython), else in a thread of its own, waited for (a Jupyter kernel runs every cell
    inside its running loop, where ``asyncio.run`` refuses). Its value, or its error raised here.
    A Ctrl-C ends the wait; the work, bounded by its own timeouts, finishes in its thread."""
    import asyncio   # here: the stacks and allrun commands load this module before their ssh starts

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    pending = in_background(lambda: asyncio.run(make()), name)
    pending.wait(float("inf"))
    if pending.error is not None:
        raise pending.error
    return pending.result(time.monotonic())


def within(seconds: float, work: Callable, default=None):
    """``work()``'s value if it returns within ``seconds``, else (or if it fails) ``default``."""
    return in_background(work).result(time.monotonic() + seconds, default)


def until(ready: Callable, deadline: float, first_s: float = 0.005, longest_s: float = 0.1):
    """``ready()``'s first true value, or its last one once ``deadline`` (``time.monotonic()``)
    has passed. Only for what no event announces (say why where it is used): ``ready`` is asked
    at once, then after pauses that double from ``first_s`` up to ``longest_s``, the last one
    cut at the deadline, so an early answer is seen soon and a long wait costs little CPU."""
    pause = first_s
    while True:
        value = ready()
        left = deadline - time.monotonic()
        if value or left <= 0:
            return value
        time.sleep(min(pause, left))
        pause = min(pause * 2, longest_s)
