"""Hear at once when one of the World's own processes (controller, launcher, plain engines) ends.

One daemon thread per World blocks on the processes' pid file descriptors (Linux 5.3+: a pidfd
becomes readable when its process exits), so nothing is polled and the rank-waiting loop is woken
the moment the World loses a process. Where pidfds are not available, the thread waits on each
child in turn (``Popen.wait``: a blocking waitpid, still no polling); a process already gone when
the watch starts is reported at once.
"""
from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Sequence

from mlp_magic.machine.deadline import until


class Lifeline:
    """Calls ``on_end(process)`` once, from its own thread, for the first of ``processes`` to end
    (each has ``pid``, ``popen`` and ``running()``: world/processes.ManagedProcess)."""

    def __init__(self, processes: Sequence, on_end: Callable):
        self.processes = list(processes)
        self.on_end = on_end
        self.ended = None
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._watch, name="mlp-world-lifeline", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop watching (the World is being stopped on purpose)."""
        try:
            os.write(self._stop_w, b"x")
        except OSError:
            pass
        self._thread.join(2.0)
        for fd in (self._stop_r, self._stop_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _watch(self) -> None:
        fds = _pidfds(self.processes)
        try:
            if fds is None:
                ended = self._wait_children()
            else:
                ended = self._wait_pidfds(fds)
        finally:
            for fd in (fds or {}):
                os.close(fd)
        if ended is not None:
            self.ended = ended
            self.on_end(ended)

    def _wait_pidfds(self, fds: dict):
        poller = select.poll()
        for fd in [*fds, self._stop_r]:
            poller.register(fd, select.POLLIN)
        for fd, _event in poller.poll():
            if fd != self._stop_r:
                return fds[fd]
        return None

    def _wait_children(self):
        """No pidfds: wait for the first process (the controller outlives nothing of ours) while
        the stop pipe is not written; the others are found by ``running()`` afterwards."""
        for process in self.processes:
            if not process.running():
                return process
        # The launcher (or the only plain engine) is the usual first to go, but any may: wait on
        # each in its own waiter thread, the first to return wins.
        first = threading.Event()
        ended: list = []

        def wait_one(process) -> None:
            try:
                process.popen.wait()
            except Exception:  # noqa: BLE001 - a wait that fails means we cannot tell: say nothing
                return
            ended.append(process)
            first.set()

        for process in self.processes:
            threading.Thread(target=wait_one, args=(process,), daemon=True).start()
        stop_seen = threading.Thread(target=lambda: (os.read(self._stop_r, 1), first.set()), daemon=True)
        stop_seen.start()
        first.wait()
        return ended[0] if ended else None


def wait_for_ends(processes: Sequence, seconds: float) -> bool:
    """Block until every one of ``processes`` has ended, at most ``seconds``; True when they have.
    Woken by their pid file descriptors; where there are none, ``running()`` is asked on
    machine/deadline.until's pace (a child's end then has no event we can wait on with a limit)."""
    deadline = time.monotonic() + seconds
    running = [process for process in processes if process.running()]
    fds = _pidfds(running)
    if fds is None:
        return until(lambda: not any(process.running() for process in running), deadline, longest_s=0.05)
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    left = set(fds)
    try:
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for fd, _event in poller.poll(remaining * 1000):
                poller.unregister(fd)
                left.discard(fd)
        return True
    finally:
        for fd in fds:
            os.close(fd)


def _pidfds(processes: Sequence):
    """{pidfd: process}, or None where pidfds cannot be had (not Linux, an old kernel)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    fds = {}
    try:
        for process in processes:
            fds[opener(process.pid)] = process
    except OSError:
        for fd in fds:
            os.close(fd)
        return None
    return fds
