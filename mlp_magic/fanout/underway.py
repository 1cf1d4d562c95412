"""Work on many hosts under way at once, finished against one deadline, and stopped for real
when the caller gives up first.

A fan-out (fanout/hosts) starts a few parts, one a transport (the other hosts over ssh or a
World's engines, this machine in-process), then waits for each until one deadline. A Ctrl-C, a
SIGTERM (the commands turn it into one) or an error while they run must not leave the hosts'
ssh clients and remote commands running after the caller is gone: every part that started is
stopped before the exception goes on.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from mlp_magic.ssh.interrupts import InterruptsDeferred


class Underway:
    """One part under way: ``finish(deadline)`` gives its answers ({host: answer}), the late ones
    stopped; ``stop()`` stops what it started (for a part whose work ends by itself: nothing);
    ``wait(deadline)`` waits for every answer, stopping nothing (True: all came; a part that
    cannot tell without finishing, one that runs only when finished, says False at once);
    ``so_far()`` is what came already."""

    def __init__(self, finish: Callable[[float], dict], stop: Callable[[], None] | None = None,
                 wait: Callable[[float], bool] | None = None, so_far: Callable[[], dict] | None = None):
        self.finish, self.stop = finish, stop or (lambda: None)
        self.wait = wait or (lambda deadline: False)
        self.so_far = so_far or dict


def start_all(starts: Iterable[Callable[[], Underway]]) -> Underway:
    """Start every part (``starts``: each starts one, at once); one Underway for them all, whose
    finish merges theirs. A Ctrl-C while they start is acted on once each of them can be
    stopped; on any exception, here or in the finish, every part that started is stopped before
    the exception goes on."""
    parts: list = []

    def stop() -> None:
        _stop_each(parts[::-1])   # the last started first: this machine's part stops at once

    def finish(deadline: float) -> dict:
        found: dict = {}
        try:
            for part in parts:
                found.update(part.finish(deadline))
        except BaseException:
            stop()
            raise
        return found

    def so_far() -> dict:
        return {host: answer for part in parts for host, answer in part.so_far().items()}

    try:
        with InterruptsDeferred() as deferred:
            for start in starts:
                parts.append(start())
        if deferred.asked:
            raise KeyboardInterrupt
    except BaseException:
        stop()
        raise
    return Underway(finish, stop, lambda deadline: all([part.wait(deadline) for part in parts]), so_far)


def finish_all(starts: Iterable[Callable[[], Underway]], deadline: float) -> dict:
    """Start every part, then finish each by ``deadline`` (``start_all``): {host: answer} of all."""
    return start_all(starts).finish(deadline)


def _stop_each(parts: list) -> None:
    """Every part's ``stop``, even when one is cut short (a second Ctrl-C): that goes on after."""
    if parts:
        try:
            parts[0].stop()
        finally:
            _stop_each(parts[1:])
