"""In each rank: a thread that ends the rank's hung torch.distributed collectives when the
kernel asks, while the main thread is blocked in C with the GIL released (gloo and NCCL waits
release it; SIGINT cannot end them: Python's handler runs only once the main thread is back).

The ask is ``UNBLOCK_SIGNAL``, sent to the rank's process (agent/signals: here directly, on
other hosts by their agent), answered by a thread of engine/side_signal. It shuts down the
connections of every gloo process group (the sockets its ``gloo_tcp_loop`` thread watches:
never ZeroMQ's or MPI's), and the blocked collective fails with gloo's "Connection closed by
peer". The process, and every Python object it holds, stays; unblock/rank/regroup makes the
default group again.
"""
from __future__ import annotations

import os
import platform
import socket
import time

from mlp_magic.engine.side_signal import on_signal
from mlp_magic.unblock.pure.procfs import GLOO_LOOP_THREAD, UNBLOCK_SIGNAL, epoll_fd_of, watched_fds

_STATE: dict = {}   # "pending": unblocked since the default group was last made
_LOOP_TRIES, _LOOP_PAUSE_S = 50, 0.01   # a loop thread handling an event is asked again


def install() -> bool:
    """Answer ``UNBLOCK_SIGNAL`` (engine/side_signal), once per process; True when in place."""
    return on_signal(UNBLOCK_SIGNAL, _unblock, "mlp-unblock")


def _unblock() -> None:
    _STATE["pending"] = True   # the default group must be made again (unblock/rank/regroup)
    cut_gloo_connections()


def unblocked() -> bool:
    """Whether this rank was unblocked since its default group was last made."""
    return bool(_STATE.get("pending"))


def regrouped() -> None:
    _STATE.pop("pending", None)


def cut_gloo_connections(task_root: str = "/proc/self/task") -> dict:
    """Shut down the connected sockets of every gloo loop thread of this process:
    {"loops": threads found, "closed": sockets shut down, "unseen": loops not seen waiting}."""
    machine = platform.machine()
    loops = closed = unseen = 0
    for tid in os.listdir(task_root):
        if _read(f"{task_root}/{tid}/comm").strip() != GLOO_LOOP_THREAD:
            continue
        loops += 1
        epoll_fd = None
        for _ in range(_LOOP_TRIES):
            epoll_fd = epoll_fd_of(_read(f"{task_root}/{tid}/syscall"), machine)
            if epoll_fd is not None:
                break
            time.sleep(_LOOP_PAUSE_S)
        if epoll_fd is None:
            unseen += 1
            continue
        watched = watched_fds(_read(f"/proc/self/fdinfo/{epoll_fd}"))
        closed += sum(_shut_down(fd, inode) for fd, inode in watched)
    return {"loops": loops, "closed": closed, "unseen": unseen}


def _shut_down(fd: int, inode: int | None) -> int:
    """1 when ``fd`` is still the connected socket the loop watches (the same inode: an epoll
    entry outlives a descriptor closed while another process holds the socket, and the number
    may since be another socket's), now shut down both ways (its listener stays); through a
    copy of the descriptor: gloo still owns, and closes, its own."""
    try:
        if inode is None or os.fstat(fd).st_ino != inode:
            return 0
        if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
            return 0
        copy = socket.socket(fileno=os.dup(fd))
    except OSError:
        return 0
    try:
        copy.getpeername()
        copy.shutdown(socket.SHUT_RDWR)
        return 1
    except OSError:   # a listener, or already closed
        return 0
    finally:
        copy.close()


def _read(path: str) -> str:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return ""
