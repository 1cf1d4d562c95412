"""Be told when a folder's files change: inotify on Linux, a cheap stat of the folder elsewhere.

The kernels publish their Worlds as files (world/published: a new file renamed into place, so a
reader never sees half of one); the live panel's aggregator watches the folder so that a rank's
change reaches the panel at once. Linux's inotify, through libc (no extra package), wakes the
server's event loop when a file is renamed in, rewritten or removed. Where inotify cannot be had
(another OS, no libc, the watch limit reached), the folder's modification time is compared every
``FALLBACK_EVERY_S``: a rename in it changes it.
"""
from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import struct
from collections.abc import Callable

FALLBACK_EVERY_S = 0.25
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, getattr(os, "O_CLOEXEC", 0o2000000)
_IN_CLOSE_WRITE, _IN_MOVED_FROM, _IN_MOVED_TO = 0x08, 0x40, 0x80
_IN_CREATE, _IN_DELETE, _IN_DELETE_SELF = 0x100, 0x200, 0x400
_MASK = _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF
_EVENT = struct.Struct("iIII")   # wd, mask, cookie, len (then len bytes of name)


def _inotify_fd(path: str) -> int | None:
    """A non-blocking inotify descriptor watching ``path``, or None where there is none."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(path), _MASK) < 0:
        os.close(fd)
        return None
    return fd


def changed_names(data: bytes) -> list:
    """The file names in a buffer of inotify events (pure; events may be several per read)."""
    names, offset = [], 0
    while offset + _EVENT.size <= len(data):
        _wd, _mask, _cookie, length = _EVENT.unpack_from(data, offset)
        raw = data[offset + _EVENT.size: offset + _EVENT.size + length]
        names.append(raw.split(b"\0", 1)[0].decode("utf-8", "replace"))
        offset += _EVENT.size + length
    return names


class DirWatch:
    """Calls ``on_change()`` on the running event loop soon after files in ``path`` change.

    ``on_change`` is called once for a burst of events (they are drained first), never while a
    previous call is still running: it is a plain function, quick (schedule work, do not do it).
    """

    def __init__(self, path: str, on_change: Callable[[], None]):
        self.path = path
        self.on_change = on_change
        self.inotify = False
        self._fd: int | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        os.makedirs(self.path, mode=0o700, exist_ok=True)
        self._fd = _inotify_fd(self.path)
        if self._fd is not None:
            self.inotify = True
            loop.add_reader(self._fd, self._drain)
        else:
            self._task = loop.create_task(self._compare_mtimes())

    def _drain(self) -> None:
        seen = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                self.stop()   # the descriptor broke: fall back to comparing mtimes
                self._task = asyncio.get_running_loop().create_task(self._compare_mtimes())
                break
            if not data:
                break
            seen = seen or any(not name.startswith(".") for name in changed_names(data))
        if seen:
            self.on_change()

    async def _compare_mtimes(self) -> None:
        last = None
        while True:
            try:
                now = os.stat(self.path).st_mtime_ns
            except OSError:
                now = None
            if now != last:
                last = now
                self.on_change()
            await asyncio.sleep(FALLBACK_EVERY_S)

    def stop(self) -> None:
        if self._fd is not None:
            try:
                asyncio.get_running_loop().remove_reader(self._fd)
            except RuntimeError:
                pass
            os.close(self._fd)
            self._fd = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
