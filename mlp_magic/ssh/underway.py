"""Work on many hosts under way at once, finished against one deadline, and stopped for real
when the caller gives up first.

The collectors (stacks, GPU inventories) each start a few parts (the other hosts over ssh or a
World's engines, this machine in-process), then wait for each until one deadline. A Ctrl-C, a
SIGTERM (the commands turn it into one) or an error while they run must not leave the hosts'
ssh clients and remote commands running after the caller is gone: every part that started is
stopped before the exception goes on.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from mlp_magic.ssh.interrupts import InterruptsDeferred


class Underway:
    """One part under way: ``finish(deadline)`` gives its answers ({host: answer}); ``stop()``
    stops what it started (for a part whose work ends by itself: nothing)."""

    def __init__(self, finish: Callable[[float], dict], stop: Callable[[], None] | None = None):
        self.finish, self.stop = finish, stop or (lambda: None)


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

    try:
        with InterruptsDeferred() as deferred:
            for start in starts:
                parts.append(start())
        if deferred.asked:
            raise KeyboardInterrupt
    except BaseException:
        stop()
        raise
    return Underway(finish, stop)


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


def follow_in_background(launch, *, timeout: float, max_bytes: int, at_once: int, name: str) -> tuple:
    """Start ``launch``'s hosts (``ssh/spawn.Launch``: every one now when they are at most
    ``at_once``, so the handshakes overlap what the caller does next; else that many at a time)
    and follow them in a thread of their own: (HostRunner, BackgroundRun). The runner (asyncio)
    is imported only once the first ssh started; its processes are stopped if it cannot be made."""
    fanout = min(len(launch.targets), at_once)
    if fanout == len(launch.targets):
        launch.start_all()
    try:
        from mlp_magic.ssh.runner import BackgroundRun, HostRunner, RunOptions

        options = RunOptions(ssh=launch.ssh, fanout=fanout, timeout=timeout, local=launch.local,
                             max_bytes=max_bytes, connect_timeout=launch.connect_timeout)
        runner = HostRunner(launch.targets, launch.command, options, launch=launch)
    except BaseException:
        launch.stop_unclaimed()
        raise
    return runner, BackgroundRun(runner, name)
