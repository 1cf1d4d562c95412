"""The per-host start slots (engine/main: one rank per core through its start-up), kept safe.

The slots are files in a host-local folder (/dev/shm where there is one), which any user of the
host can create first. So before a rank uses it, the folder is checked: it must be a real
folder (not a link), its owner ours, and writable by nobody else; the slot files are opened
without following links, and must be ours too. A folder that fails says why in one line on the
rank's stderr (the launcher's log) and the rank starts at once, as where slots cannot work.

Waiting for a slot has a limit (``SLOT_WAIT_S``): a holder that never lets go (a stopped
process, someone else's lock) must not keep a rank from starting. Past it the rank says so in
one line and starts without a slot.
"""
from __future__ import annotations

import fcntl
import os
import signal
import socket
import stat
import sys
import threading
import time

SLOT_WAIT_S = 300.0   # at most this long for a slot; 128 ranks on 2 cores wait about 30 s
# ... and at most half the start's own patience, which the World sets here (world/start/launch): a
# small World's ranks queued behind another World's 128 starting ones would otherwise wait longer
# than their World waits for them (measured: a 4-rank start took 35.1 s beside a 128-rank one on 2
# cores, and the start gives up after 34 s without a new rank).
WAIT_VARIABLE = "MLP_MAGIC_START_SLOT_WAIT_S"


def wait_limit(environ=os.environ) -> float:
    """How long this rank may wait for a slot: ``WAIT_VARIABLE`` (a positive number of seconds,
    at most ``SLOT_WAIT_S``), else ``SLOT_WAIT_S``."""
    try:
        wanted = float(environ.get(WAIT_VARIABLE, ""))
    except ValueError:
        return SLOT_WAIT_S
    return min(wanted, SLOT_WAIT_S) if wanted > 0 else SLOT_WAIT_S


POLL_S = 0.05         # the longest pause between tries off the main thread: tests, not ranks


def slot_folder() -> str:
    """Host-local (tmpfs where there is one, never a shared $TMPDIR): slots are this host's cores."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else "/tmp"
    return os.path.join(base, f"mlp_magic-start-slots-{os.getuid()}-{socket.gethostname()}")


def folder_problem(folder: str) -> str:
    """Why ``folder`` may not hold our slots ("" when it may); created (0700) when missing."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{folder} is not a folder (a link or a file)"
    if info.st_uid != os.getuid():
        return f"{folder} is owned by uid {info.st_uid}, not by this user (uid {os.getuid()})"
    if info.st_mode & 0o022:
        return f"{folder} is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return ""


def open_slot(path: str):
    """The slot file, ours, opened without following a link."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    if os.fstat(fd).st_uid != os.getuid():
        os.close(fd)
        raise PermissionError(f"{path} is not this user's")
    return os.fdopen(fd, "r+b", buffering=0)


def say(line: str) -> None:
    print(f"mlp_magic: {line}", file=sys.stderr, flush=True)


def take_start_slot(rank: int | None, names: list, folder: str | None = None, wait_s: float = SLOT_WAIT_S):
    """Block until one of this host's start slots is ours (at most ``wait_s``); return its open
    file (closing it frees the slot), or None where slots cannot or may not be used, or when the
    wait ran out (each said in one line; silently where flock does not work): the rank then
    starts at once, as it would without slots."""
    folder = folder or slot_folder()
    try:
        problem = folder_problem(folder)
        if problem:
            say(f"start slots not used: {problem}")
            return None
        handles = [open_slot(os.path.join(folder, name)) for name in names]
    except OSError as err:   # a link where a slot should be (ELOOP), no room, no /dev/shm...
        say(f"start slots not used: {err}")
        return None
    first = (rank or 0) % len(handles)
    taken = None
    try:
        taken = _free_slot(handles, first)
        if taken is None:
            # All busy: wait in the kernel on this rank's own slot (ranks spread over the slots
            # by number), woken the moment it frees; polling 128 waiting ranks cost CPU the
            # starting ones need.
            if _wait_for(handles[first], wait_s):
                taken = handles[first]
            else:
                say(f"rank {rank}: no start slot free in {folder} after {wait_s:g} s "
                    "(held by a process that does not let go?); starting without one")
    except OSError:     # ENOLCK, ENOSYS...: flock does not work here
        taken = None
    finally:
        for handle in handles:
            if handle is not taken:
                handle.close()
    return taken


def _free_slot(handles: list, first: int):
    """A slot nobody holds right now, trying this rank's own first; None when all are taken."""
    for offset in range(len(handles)):
        handle = handles[(first + offset) % len(handles)]
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue   # taken: another rank is starting on that core
        return handle
    return None


def _try_flock(handle) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


class _TimedOut(Exception):
    pass


def _wait_for(handle, wait_s: float) -> bool:
    """flock ``handle`` within ``wait_s``: a blocking flock cut by a timer signal on the main
    thread (a rank's start: nothing else runs yet), tried again and again elsewhere. False when
    it ran out."""
    if threading.current_thread() is not threading.main_thread():
        # No event to wait on with a limit here: only a signal cuts a blocking flock short, and
        # Python handles signals on the main thread only (elsewhere the interrupted flock is
        # retried, PEP 475). So off it (tests, never a rank) machine/deadline.until tries again.
        from mlp_magic.machine.deadline import until   # here: a rank never needs it

        return until(lambda: _try_flock(handle), time.monotonic() + wait_s, longest_s=POLL_S)

    def ring(signum, frame):
        raise _TimedOut

    previous = signal.signal(signal.SIGALRM, ring)
    try:
        signal.setitimer(signal.ITIMER_REAL, max(wait_s, 0.001))
        fcntl.flock(handle, fcntl.LOCK_EX)
        return True
    except _TimedOut:
        return False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
