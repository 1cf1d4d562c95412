"""Run an asyncio HostRunner from blocking code: a terminal, or a notebook's cell.

The runner's event loop runs in a worker thread while the calling thread shows live lines and
waits, so Ctrl-C (a KeyboardInterrupt in the calling thread, whether a terminal or a Jupyter
kernel) stops the unfinished hosts, keeps what they printed, and still returns every result.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from mlp_magic.core.results import HostResult
from mlp_magic.ssh.interrupts import InterruptsDeferred, dropped_interrupt

LIVE_BACKLOG = 20000   # live lines waiting for the display; more are not shown live


def run_blocking(runner, on_output: Callable | None = None, interrupted: bool = False) -> list[HostResult]:
    """Run a HostRunner in a worker thread's event loop; ``on_output`` is called in *this*
    thread (safe for a notebook's display). KeyboardInterrupt here interrupts the runner, which
    then returns every result (unfinished hosts marked interrupted); a second one propagates.
    ``interrupted``: the first Ctrl-C came already (the runner starts stopped)."""
    worker = _Worker(runner, on_output)
    asked, started = interrupted, False
    while True:
        try:
            if not started:
                started = True
                asked = worker.start() or asked
            if asked or dropped_interrupt():   # one CPython dropped counts (the CLI notices them)
                asked = False
                raise KeyboardInterrupt
            item = worker.lines.get(timeout=0.5)
        except queue.Empty:
            continue
        except KeyboardInterrupt:
            if worker.interrupted:
                raise
            worker.interrupted = True
            runner.request_interrupt()
            continue
        if item is _FINISHED:
            break
        on_output(*item)
    return worker.result(on_output)


_FINISHED = object()


class _Worker:
    """The thread that runs the runner's event loop, and the queue of live lines it fills."""

    def __init__(self, runner, on_output: Callable | None):
        self.lines: queue.SimpleQueue = queue.SimpleQueue()
        self.skipped = 0
        self.interrupted = False
        self._outcome: dict = {}
        if on_output is not None:
            runner.on_output = self._enqueue
        self._thread = threading.Thread(target=self._work, args=(runner,), name="allrun", daemon=True)

    def start(self) -> bool:
        """Start the worker whole, signals deferred; True when a Ctrl-C came meanwhile (it is
        then handled like any first one)."""
        with InterruptsDeferred() as deferred:
            self._thread.start()
            _prefetch_renderers()  # while the hosts work: the summary shows at once
        return deferred.asked

    def _enqueue(self, host: str, stream: str, line: str) -> None:
        # A flood must not grow memory when the display falls behind: the streaming view is
        # best-effort; the results (and --outdir) keep the output.
        if self.lines.qsize() < LIVE_BACKLOG:
            self.lines.put((host, stream, line))
        else:
            self.skipped += 1

    def _work(self, runner) -> None:
        import asyncio

        try:
            self._outcome["results"] = asyncio.run(runner.run())
        except BaseException as error:  # handed to the calling thread
            self._outcome["error"] = error
        finally:
            self.lines.put(_FINISHED)

    def result(self, on_output: Callable | None) -> list[HostResult]:
        self._thread.join()
        if self.skipped and on_output is not None:
            on_output("allrun", "stderr", f"[{self.skipped} lines not shown live: the display fell behind]")
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome["results"]


def _prefetch_renderers() -> None:
    from mlp_magic.output.pure import grouping, text as render_text  # noqa: F401
