"""In each rank: a thread that ends the rank's hung torch.distributed collectives when the
kernel asks, while the main thread is blocked in C with the GIL released (gloo and NCCL waits
release it; SIGINT cannot end them: Python's handler runs only once the main thread is back).

The ask is ``UNBLOCK_SIGNAL``, sent to the rank's process (agent/signals: here directly, on
other hosts by their agent). ``faulthandler`` handles it in C, writing a traceback to a pipe
that this thread reads: no Python code, no ``set_wakeup_fd`` (the event loop's), and whichever
thread the signal lands on. The thread then shuts down the connections of every gloo process
group (the sockets its ``gloo_tcp_loop`` thread watches: never ZeroMQ's or MPI's), and the
blocked collective fails with gloo's "Connection closed by peer". The process, and every Python
object it holds, stays; unblock/rank/regroup makes the default group again.
"""
from __future__ import annotations

import faulthandler
import os
import platform
import socket
import threading
import time

from mlp_magic.unblock.pure.procfs import GLOO_LOOP_THREAD, UNBLOCK_SIGNAL, epoll_fd_of, watched_fds

_STATE: dict = {}   # "thread": the unblock thread, "pipe"; "pending": unblocked since the group was made
_LOOP_TRIES, _LOOP_PAUSE_S = 50, 0.01   # a loop thread handling an event is asked again


def install() -> bool:
    """Register the signal and start the thread, once per process; True when in place."""
    if "thread" in _STATE:
        return True
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)   # a full pipe must not block the thread the signal hit
    try:
        # every thread's stack: the handler writes something whichever thread the signal hit
        faulthandler.register(UNBLOCK_SIGNAL, file=write_end, all_threads=True, chain=False)
    except (OSError, RuntimeError, ValueError):
        os.close(read_end)
        os.close(write_end)
        return False
    thread = threading.Thread(target=_watch, args=(read_end,), name="mlp-unblock", daemon=True)
    thread.start()
    _STATE.update(thread=thread, pipe=(read_end, write_end))
    return True


def _watch(read_end: int) -> None:
    while os.read(read_end, 65536):
        time.sleep(0.05)   # the rest of the handler's writes: one unblock for one signal
        _drain(read_end)
        _STATE["pending"] = True   # the default group must be made again (unblock/rank/regroup)
        try:
            cut_gloo_connections()
        except Exception:  # noqa: BLE001 - the thread must outlive any one attempt; a rank not
            pass           # freed is named by the kernel's bound


def _drain(read_end: int) -> None:
    os.set_blocking(read_end, False)
    try:
        while os.read(read_end, 65536):
            pass
    except BlockingIOError:
        pass
    finally:
        os.set_blocking(read_end, True)


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
