"""In each rank: a thread that does one thing when the kernel sends a signal, even while the
main thread is blocked in C with the GIL released (a collective, MPI) or holds no Python frame
at all. SIGINT cannot serve: Python's handler runs only once the main thread is back.

``faulthandler`` handles the signal in C, writing a traceback to a pipe that the thread reads:
no Python code in the handler, no ``set_wakeup_fd`` (the event loop's), and it works whichever
thread the signal lands on. Used by ``%mpirun --unblock`` (unblock/rank/side), the panel's
Unblock (also unblock/rank/mpi_world: an idle rank drives MPI's progress) and the hang report's
collectives (stacks/rank/recorder).

The signals are named here, where every rank has them from its start (engine/bootstrap), and
an action may be named as ``"module:function"``: it is imported when its signal first comes, so
an engine holds none of those modules until then (engine/__init__). A signal is caught from the
start all the same: the kernel and the agents signal only a process that catches it.
"""
from __future__ import annotations

import atexit
import faulthandler
import importlib
import os
import signal
import threading
import time
from collections.abc import Callable

# Real-time signals: frameworks and batch systems take SIGUSR1 and SIGUSR2 for themselves (and
# SIGUSR1 is the stacks' own dump, engine/bootstrap).
UNBLOCK_SIGNAL = int(signal.SIGRTMIN) + 6       # end a hung collective (unblock/rank/side)
COLLECTIVES_SIGNAL = int(signal.SIGRTMIN) + 7   # say which collective (stacks/rank/recorder)
PROGRESS_SIGNAL = int(signal.SIGRTMIN) + 8      # an idle rank drives MPI's progress (mpi_world)

_THREADS: dict = {}   # {signal number: the thread that answers it}
_SETTLE_S = 0.05      # the rest of the handler's writes: one action for one signal
# Set as the process exits: no action starts after it, and one in an MPI call stops on it
# (mpi4py's MPI_Finalize, at exit, must not run while a side thread is inside MPI).
EXITING = threading.Event()
_EXIT_WAIT_S = 0.5    # an action's MPI call returns within a moment
_RUNNING = threading.Condition()
_ACTIONS_RUNNING = [0]


def on_signal(signum: int, action: Callable[[], None] | str, name: str) -> bool:
    """Run ``action`` (a function, or ``"module:function"`` imported at the first signal) in a
    thread named ``name`` each time ``signum`` arrives, once per process and signal; True when
    in place (False: faulthandler refused the signal)."""
    if signum in _THREADS:
        return True
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)   # a full pipe must not block the thread the signal hit
    try:
        # every thread's stack: the handler writes something whichever thread the signal hit
        faulthandler.register(signum, file=write_end, all_threads=True, chain=False)
    except (OSError, RuntimeError, ValueError):
        os.close(read_end)
        os.close(write_end)
        return False
    if not _THREADS:
        atexit.register(_at_exit)   # after mpi4py's own: it runs before MPI_Finalize
    thread = threading.Thread(target=_answer, args=(read_end, action), name=name, daemon=True)
    _THREADS[signum] = thread
    thread.start()
    return True


def _answer(read_end: int, action: Callable[[], None] | str) -> None:
    while os.read(read_end, 65536):
        time.sleep(_SETTLE_S)
        _drain(read_end)
        with _RUNNING:
            if EXITING.is_set():
                return
            _ACTIONS_RUNNING[0] += 1
        try:
            action = _resolved(action)
            action()
        except Exception:  # noqa: BLE001 - the thread must outlive any one attempt; the kernel
            pass           # names a rank that did not answer in time
        finally:
            with _RUNNING:
                _ACTIONS_RUNNING[0] -= 1
                _RUNNING.notify_all()


def _resolved(action: Callable[[], None] | str) -> Callable[[], None]:
    if not isinstance(action, str):
        return action
    module, _, name = action.partition(":")
    return getattr(importlib.import_module(module), name)


def _at_exit() -> None:
    with _RUNNING:
        EXITING.set()
        _RUNNING.wait_for(lambda: not _ACTIONS_RUNNING[0], timeout=_EXIT_WAIT_S)


def _drain(read_end: int) -> None:
    os.set_blocking(read_end, False)
    try:
        while os.read(read_end, 65536):
            pass
    except BlockingIOError:
        pass
    finally:
        os.set_blocking(read_end, True)
