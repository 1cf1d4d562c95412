"""Ctrl-C and SIGTERM held back while a critical section runs, and acted on afterwards."""
from __future__ import annotations

import signal
import sys


class InterruptsDeferred:
    """SIGINT and SIGTERM recorded (``asked``) instead of raised, in the main thread, for as
    long as the block runs. A KeyboardInterrupt raised during an import leaves the module half
    made (a later import of it fails), and CPython drops one raised inside a finalizer or a
    weakref callback (importlib's module locks have one): a Ctrl-C there would be lost."""

    def __enter__(self):
        self.asked, self.saved = False, []
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                handler = signal.getsignal(sig)
                if callable(handler):  # one that raises in Python code (SIG_DFL, SIG_IGN stay)
                    signal.signal(sig, self._record)
                    self.saved.append((sig, handler))
            except ValueError:
                break   # not the main thread: signals are not ours to handle
        return self

    def _record(self, signum, frame) -> None:
        self.asked = True

    def __exit__(self, *exc) -> bool:
        if dropped_interrupt():
            self.asked = True
        saved, self.saved = self.saved, []
        try:
            while saved:   # SIGINT, the likely one, comes back last
                sig, handler = saved.pop()
                signal.signal(sig, handler)
        finally:
            for sig, handler in saved:   # when one came back and fired midway
                signal.signal(sig, handler)
        return False


def terminate_as_interrupt() -> None:
    """For a command-line process: SIGTERM (``kill``, a job scheduler) raises KeyboardInterrupt
    in the main thread, so that the command stops its hosts' commands and its own children as
    after a Ctrl-C instead of dying with them left running."""
    try:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:
        pass   # not the main thread (main() called from a program's thread): not ours to handle


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


_dropped = {"count": 0}   # KeyboardInterrupts CPython dropped, not yet acted on


def notice_dropped_interrupts() -> None:
    """For a command-line process: a KeyboardInterrupt that CPython drops (raised inside a
    finalizer or a weakref callback: "Exception ignored in ...") is counted instead of lost;
    ``dropped_interrupt()`` then reports it where the program can act on it."""
    previous = sys.unraisablehook

    def hook(unraisable):
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            _dropped["count"] += 1
            return
        previous(unraisable)

    sys.unraisablehook = hook


def dropped_interrupt() -> bool:
    """Whether a Ctrl-C was dropped since the last call (then it is taken: reported once)."""
    count, _dropped["count"] = _dropped["count"], 0
    return count > 0
