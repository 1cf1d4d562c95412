"""In each rank: a thread that does one thing when the kernel sends a signal, even while the
main thread is blocked in C with the GIL released (a collective, MPI) or holds no Python frame
at all. SIGINT cannot serve: Python's handler runs only once the main thread is back.

``faulthandler`` handles the signal in C, writing a traceback to a pipe that the thread reads:
no Python code in the handler, no ``set_wakeup_fd`` (the event loop's), and it works whichever
thread the signal lands on. Used by ``%mpirun --unblock`` (unblock/rank/side), the panel's
Unblock (also unblock/rank/mpi_world: an idle rank drives MPI's progress) and the hang report's
collectives (stacks/rank/recorder).
"""
from __future__ import annotations

import faulthandler
import os
import threading
import time
from collections.abc import Callable

_THREADS: dict = {}   # {signal number: the thread that answers it}
_SETTLE_S = 0.05      # the rest of the handler's writes: one action for one signal


def on_signal(signum: int, action: Callable[[], None], name: str) -> bool:
    """Run ``action`` in a thread named ``name`` each time ``signum`` arrives, once per process
    and signal; True when in place (False: faulthandler refused the signal)."""
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
    thread = threading.Thread(target=_answer, args=(read_end, action), name=name, daemon=True)
    _THREADS[signum] = thread
    thread.start()
    return True


def _answer(read_end: int, action: Callable[[], None]) -> None:
    while os.read(read_end, 65536):
        time.sleep(_SETTLE_S)
        _drain(read_end)
        try:
            action()
        except Exception:  # noqa: BLE001 - the thread must outlive any one attempt; the kernel
            pass           # names a rank that did not answer in time


def _drain(read_end: int) -> None:
    os.set_blocking(read_end, False)
    try:
        while os.read(read_end, 65536):
            pass
    except BlockingIOError:
        pass
    finally:
        os.set_blocking(read_end, True)
