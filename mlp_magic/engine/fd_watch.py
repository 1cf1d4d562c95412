"""Output written below Python (fd 1 and 2: C code such as NCCL's logs, child processes, ``!cmd``).

ipykernel points fd 1 and 2 at pipes and reads them in a thread, 1,000 bytes at a time, with no
way to tell when what is in the pipe has been passed on. At a cell's end the engine must know
that: the cell's last fd output belongs in that cell's log and reply. So this module takes over
the reading: one thread per pipe reads and delivers each chunk while holding a lock, which makes
"the pipe is empty, under the lock" mean "everything written so far has been delivered".
"""
from __future__ import annotations

import array
import codecs
import fcntl
import os
import select
import termios
import threading

from mlp_magic.engine.ipykernel_private import fd_pipe

READ_BYTES = 1 << 16
STALL_SECONDS = 2.0      # a drain gives up after this long with no byte delivered
HANDOVER_SECONDS = 5.0   # at most this long for ipykernel's thread to step aside


class FdWatcher:
    """Reads one of ipykernel's fd pipes; ``route(text)`` receives what was written, decoded."""

    def __init__(self, fid: int, echo_fd: int, route):
        self.fid = fid
        self.echo_fd = echo_fd   # the original fd 1 / 2 (the launcher's log), as ipykernel does
        self.route = route
        self.delivered = 0
        self._lock = threading.Lock()
        self._moved = threading.Condition(self._lock)   # notified after each delivered chunk
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.thread = threading.Thread(target=self._run, name="mlp-fd-watch", daemon=True)

    def _run(self) -> None:
        while True:
            try:
                select.select([self.fid], [], [])
            except (OSError, ValueError):
                return
            with self._lock:
                try:
                    data = os.read(self.fid, READ_BYTES)   # readable, and we are its one reader
                except OSError:
                    return
                if not data:
                    return
                self._deliver(data)

    def _deliver(self, data: bytes) -> None:
        try:
            self.route(self._decoder.decode(data))
        except Exception:  # this thread must never die: the pipe would fill and block the rank
            pass
        _write_all(self.echo_fd, data)
        self.delivered += len(data)
        self._moved.notify_all()

    def drain(self) -> bool:
        """Wait until what is in the pipe now has been delivered. Gives up (False) only when
        nothing moves for STALL_SECONDS; a child still writing in the background does not hold
        the cell, since only the bytes present at the start are waited for."""
        if not self._lock.acquire(timeout=STALL_SECONDS):
            return False   # a route stuck on one chunk (a full disk, a blocked launcher pipe)
        try:
            target = self.delivered + pipe_bytes(self.fid)
            while self.delivered < target:
                last = self.delivered
                self._moved.wait(STALL_SECONDS)   # releases the lock: the reader delivers meanwhile
                if self.delivered == last:
                    return False
            return True   # delivered is counted after route() returns: the last chunk is through
        finally:
            self._lock.release()


def take_over(stream, route) -> FdWatcher | None:
    """Replace ipykernel's reader of ``stream``'s fd pipe with an FdWatcher (once per stream).
    None when this ipykernel watches no fd (fd output then goes to the launcher's log), or
    watches it through internals engine/ipykernel_private does not find (ipykernel then keeps
    reading it: the output reaches the notebook, undrained and unlogged)."""
    existing = getattr(stream, "_mlp_fd_watcher", None)
    if existing is not None:
        existing.route = route
        return existing
    pipe = fd_pipe(stream)
    if pipe is None:
        return None
    pipe.stop_reader()
    pipe.reader.join(HANDOVER_SECONDS)
    if pipe.reader.is_alive():
        pipe.resume_reader()
        return None
    watcher = FdWatcher(pipe.fid, pipe.echo_fd, route)
    watcher.thread.start()
    stream._mlp_fd_watcher = watcher
    return watcher


def pipe_bytes(fid: int) -> int:
    """Bytes waiting in a pipe (0 if it cannot be asked)."""
    waiting = array.array("i", [0])
    try:
        fcntl.ioctl(fid, termios.FIONREAD, waiting)
    except OSError:
        return 0
    return waiting[0]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except OSError:
            return
