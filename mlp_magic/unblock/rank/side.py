"""In each rank: a thread that ends the rank's hung torch.distributed collectives when the
kernel asks, while the main thread is blocked in C with the GIL released (gloo and NCCL waits
release it; SIGINT cannot end them: Python's handler runs only once the main thread is back).

The ask is ``UNBLOCK_SIGNAL``, sent to the rank's process (agent/signals: here directly, on
other hosts by their agent), answered by a thread of engine/side_signal. It shuts down the
connections of every gloo process group (the sockets its ``gloo_tcp_loop`` thread watches:
never ZeroMQ's or MPI's), and the blocked collective fails with gloo's "Connection closed by
peer". A rank whose main thread spins (runs or yields, where a collective's wait sleeps) is
in an MPI call: where Open MPI runs with ULFM, COMM_WORLD is revoked instead
(unblock/rank/mpi_world) and torch's groups are left alone. NCCL groups are aborted through
torch's own ``_abort_process_group`` (verified only where a GPU is lent: see README). The
process, and every Python object it holds, stays; unblock/rank/regroup makes the default group
again.
"""
from __future__ import annotations

import os
import platform
import socket
import sys
import threading
import time

from mlp_magic.engine.side_signal import UNBLOCK_SIGNAL, on_signal
from mlp_magic.unblock.pure.procfs import GLOO_LOOP_THREAD, epoll_fd_of, polls, watched_fds
from mlp_magic.unblock.rank import mpi_world

_STATE: dict = {}   # "pending": unblocked since the default group was last made
_LOOP_TRIES, _LOOP_PAUSE_S = 50, 0.01   # a loop thread handling an event is asked again


def install() -> bool:
    """Answer ``UNBLOCK_SIGNAL`` (engine/side_signal), once per process; True when in place.
    (A World's ranks answer it through engine/bootstrap, which imports this module only when
    the signal first comes.)"""
    return on_signal(UNBLOCK_SIGNAL, unblock, "mlp-unblock")


def unblock() -> None:
    """What ``UNBLOCK_SIGNAL`` does: revoke MPI's world where a rank is in an MPI call, else end
    its torch groups' collectives. A signal that repeats the ask (unblock/verbs signals again
    the ranks whose reply is not in after a second) takes the way the first took: a rank whose
    gloo connections were cut is on its way out of the failed collective, maybe running C code
    of that exit without the GIL, and would look like one in an MPI call (issue 49: once in
    about ten runs, COMM_WORLD was revoked for a gloo-only hang)."""
    if not _STATE.get("pending") and mpi_world.ulfm_ready() and main_thread_spins_in_c():
        if mpi_world.revoke_world():   # an MPI call: torch's groups are left alone
            return
    _STATE["pending"] = True   # the default group must be made again (unblock/rank/regroup)
    cut_gloo_connections()
    abort_nccl_groups()


_LOOKS, _LOOK_PAUSE_S = 10, 0.01
# While looking, a thread that wants the GIL waits this long before the holder is asked to let
# it go: a wait of half of it is a thread running Python, far above a busy core's scheduling
# delay (with the default 5 ms interval and a 1 ms bound, a 2-core box running 4 spinning ranks
# took an MPI call for Python: measured, tests/unit/unblock/rank/test_spin_detection).
_LOOK_SWITCH_S = 0.05


def main_thread_spins_in_c(task_root: str = "/proc/self/task") -> bool:
    """Whether the main thread spins inside a C call that released the GIL: it runs or yields
    in most of a few looks (an MPI call's progress loop; a torch collective's wait sleeps
    instead), and this thread gets the GIL back at once in most of them. A main thread running
    Python (the panel's Unblock may reach one) takes the GIL while this one sleeps, and keeps
    it until asked to let go: the sleep then ends a switch interval late."""
    path, machine = f"{task_root}/{threading.main_thread().native_id}/syscall", platform.machine()
    spins = held = 0
    interval = sys.getswitchinterval()
    sys.setswitchinterval(_LOOK_SWITCH_S)
    try:
        for _ in range(_LOOKS):
            spins += polls(_read(path), machine)
            began = time.perf_counter()
            time.sleep(_LOOK_PAUSE_S)   # the GIL is free to take meanwhile
            held += time.perf_counter() - began - _LOOK_PAUSE_S > _LOOK_SWITCH_S / 2
            if held * 2 > _LOOKS:
                break
    finally:
        sys.setswitchinterval(interval)
    return spins * 2 > _LOOKS and held * 2 <= _LOOKS


# NCCL's watchdog, left to its defaults, ends the process at a collective's timeout (error
# handling 3) or when it is itself stuck (the heartbeat monitor): ranks kept alive for --unblock
# set both off, unless the user chose. _abort_process_group's own documentation asks for 0.
NCCL_ENVIRONMENT = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "TORCH_NCCL_ENABLE_MONITORING": "0"}


def prepare_environment(environ=os.environ) -> list:
    """Set NCCL's variables that are not set yet (before any group is made); the names set."""
    chosen = [name for name in NCCL_ENVIRONMENT if name not in environ]
    environ.update({name: NCCL_ENVIRONMENT[name] for name in chosen})
    return chosen


def abort_nccl_groups() -> bool:
    """NCCL's way out: its collectives wait on the GPU, with no socket to close; torch's
    ``_abort_process_group`` aborts every group's communicators from this thread, and the
    blocked collective raises. It also forgets the default group: what it was is kept first, for
    unblock/rank/regroup. True when groups were aborted."""
    from mlp_magic.unblock.rank.default_group import group_config

    config = group_config()
    if not config or "error" in config or not uses_nccl(config["backend"]):
        return False
    from torch.distributed import distributed_c10d as c10d

    abort = getattr(c10d, "_abort_process_group", None)
    if abort is None:   # a torch without it: the rank is named as not freed, with --restart
        return False
    _STATE["kept"] = config
    abort()
    return True


def uses_nccl(backend: str) -> bool:
    """``nccl``, ``cuda:nccl`` or ``cpu:gloo,cuda:nccl``: a group with NCCL communicators."""
    return any(part.rpartition(":")[2].strip() == "nccl" for part in str(backend).split(","))


def kept_group() -> dict | None:
    """What the default group was before NCCL's abort forgot it (None: no abort since)."""
    return _STATE.get("kept")


def unblocked() -> bool:
    """Whether this rank was unblocked since its default group was last made."""
    return bool(_STATE.get("pending"))


def regrouped() -> None:
    _STATE.pop("pending", None)
    _STATE.pop("kept", None)


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
