"""A HostRunner (ssh/runner) in a thread of its own with its own event loop, for callers
without one (a kernel's cell runs inside a loop that is not ours; a script has none): waited for
until a deadline, its late hosts stopped, never left running past the interpreter's exit.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from mlp_magic.ssh.runner import HostRunner

STOP_SECONDS = 5.0   # for the runner to stop its processes after a Ctrl-C, or before the exit
_LATE: set = set()   # runs given up at their deadline, still stopping (machine/deadline.Pending)


class BackgroundRun:
    """A HostRunner running in a thread of its own (its own event loop), for callers without
    one: ``wait(deadline)`` returns when every host answered or the deadline passed (the late
    hosts are then stopped in the background and reported as interrupted; a process exiting
    meanwhile waits for that first, up to ``STOP_SECONDS``). Ctrl-C stops them before it goes on."""

    def __init__(self, runner: HostRunner, name: str, then: Callable[[], None] | None = None):
        """``then()``: called in the run's thread once it ended, however it ended."""
        from mlp_magic.machine.deadline import in_background

        self.runner = runner
        self._stopping = False

        def run():
            try:
                return asyncio.run(runner.run())
            finally:
                if then is not None:
                    then()
        self._pending = in_background(run, name)

    @property
    def error(self) -> BaseException | None:
        """Why the transport itself failed (not a host: those are in ``runner.results``)."""
        return self._pending.error

    def ended_by(self, deadline: float) -> bool:
        """Whether every host answered by ``deadline``; the late ones go on (``wait`` stops them)."""
        return self._pending.wait(deadline)

    def wait(self, deadline: float) -> bool:
        try:
            done = self._pending.wait(deadline)
        except KeyboardInterrupt:
            self.stop()
            raise
        if not done:   # the answer is due now; the late hosts stop meanwhile
            self.runner.request_interrupt()
            _stopped_before_exit(self._pending)
        return done

    def stop(self) -> None:
        """Kill the remote commands and the local clients before the caller gives up on the run
        (Ctrl-C: a second one cuts this wait short, and a later call does not wait again)."""
        if self._stopping:
            return
        self._stopping = True
        self.runner.request_interrupt()
        self._pending.wait(time.monotonic() + STOP_SECONDS)


def _stopped_before_exit(pending) -> None:
    """The interpreter's exit waits for this run to end (its thread is a daemon: killed at exit,
    it would leave the late hosts' ssh clients running, as ``topo --host`` on a silent host did)."""
    global _LATE
    if not _LATE:
        import atexit

        atexit.register(_wait_for_late_runs)
    _LATE = {p for p in _LATE if not p.wait(0)} | {pending}   # (a kernel keeps no ended run)


def _wait_for_late_runs() -> None:
    deadline = time.monotonic() + STOP_SECONDS
    for pending in list(_LATE):
        pending.wait(deadline)
