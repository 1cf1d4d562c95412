"""In each rank: getting out of a blocked MPI call where Open MPI runs with ULFM (its
fault-tolerant MPI), and the communicator to use afterwards.

A World on Open MPI 5 starts its ranks with ULFM on (``OMPI_MCA_mpi_ft_enable=1``, set by
world/start/launch unless the user set it). The unblock thread of a rank that had no torch
collective to end revokes ``MPI.COMM_WORLD`` (``MPI_Comm_revoke``): the revocation reaches every
rank, and each call blocked on COMM_WORLD fails with MPI_ERR_REVOKED (mpi4py raises it). A revoked
communicator stays unusable: afterwards every rank shrinks it together (``MPI_Comm_shrink``, a new
communicator of the same processes) and the name ``comm`` of the rank's namespace is bound to
it; ``MPI.COMM_WORLD`` itself stays revoked. The new one stands for the World from then on: a
later unblock revokes it, and it is shrunk in turn. Without ULFM, a revoke would abort the whole job:
it is never tried then. Communicators the user derived (``Split``, ``Dup``) are not revoked.

Across hosts a stuck call can wait on a rank that is not stuck: a message to an idle peer over
TCP waits for the connection, which only the peer's own MPI progress completes, and the idle
peer calls no MPI. Its call cannot see the revocation until then: the idle ranks drive MPI's
progress meanwhile (``progress_until_revoked``), as a job the kernel sends them for
``%mpirun --unblock``, or from a side thread when the panel's Unblock sends ``PROGRESS_SIGNAL``
(the kernel is stuck in the cell then).
"""
from __future__ import annotations

import os
import sys
import threading
import time

from mlp_magic.engine.side_signal import EXITING, PROGRESS_SIGNAL, on_signal
from mlp_magic.unblock.pure.timing import BOUND_S

FT_VARIABLE = "OMPI_MCA_mpi_ft_enable"
_STATE: dict = {}   # "world": the communicator standing for COMM_WORLD since the last shrink


def ulfm_on(environ=os.environ) -> bool:
    return str(environ.get(FT_VARIABLE, "")).lower() in ("1", "true", "yes", "on")


def ulfm_ready() -> bool:
    """Whether an MPI call of this rank can be ended: mpi4py initialised, ULFM on."""
    return _mpi() is not None


def revoked() -> bool:
    MPI = _mpi()
    return MPI is not None and _world(MPI).Is_revoked()


def _world(MPI):
    return _STATE.get("world") or MPI.COMM_WORLD


def _mpi():
    """mpi4py's MPI where it is initialised and ULFM is on, else None."""
    MPI = sys.modules.get("mpi4py.MPI")
    if MPI is None or not ulfm_on() or not hasattr(MPI.Comm, "Revoke"):
        return None
    if not MPI.Is_initialized() or MPI.Is_finalized():
        return None
    return MPI


def revoke_world() -> bool:
    """Revoke COMM_WORLD, or what stands for it since a shrink (from the unblock thread);
    whether it was."""
    MPI = _mpi()
    if MPI is None:
        return False
    _world(MPI).Revoke()
    return True


def progress_until_revoked(seconds: float, after_s: float = 0.2, stop: threading.Event | None = None) -> bool:
    """On a rank with no call in flight while others are stuck: run MPI's progress engine until
    the revocation reaches this rank, then ``after_s`` more (the stuck ranks' messages to it,
    sent before their revocation, are taken by then), or ``seconds`` at most, or until ``stop``
    is set; whether it came. At once False where ULFM is off or mpi4py was never started (a
    torch hang)."""
    MPI = _mpi()
    if MPI is None:
        return False
    world, deadline, seen_at = _world(MPI), time.monotonic() + seconds, None
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        MPI.COMM_SELF.Iprobe()   # any MPI call runs the progress engine: TCP connections complete
        if seen_at is None and world.Is_revoked():
            seen_at = time.monotonic()
        if seen_at is not None and time.monotonic() - seen_at >= after_s:
            break
        time.sleep(0.002)
    return seen_at is not None


def install_progress() -> bool:
    """Answer ``PROGRESS_SIGNAL`` (engine/side_signal), once per process; True when in place.
    (A World's ranks answer it through engine/bootstrap, which imports this module only when
    the signal first comes.)"""
    return on_signal(PROGRESS_SIGNAL, progress_beside_main_thread, "mlp-progress")


def progress_beside_main_thread(seconds: float = BOUND_S) -> bool:
    """``progress_until_revoked`` from a side thread, while the main thread may take a new cell:
    only where MPI was started with ``MPI_THREAD_MULTIPLE`` (mpi4py's default), which lets two
    threads call MPI at once; whether the revocation came. It ends when the process exits
    (engine/side_signal.EXITING, set before mpi4py's MPI_Finalize, which waits for it)."""
    MPI = _mpi()
    if MPI is None or MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        return False
    return progress_until_revoked(seconds, stop=EXITING)


def shrink_world(user_ns: dict | None = None) -> dict | None:
    """A new communicator of COMM_WORLD's processes, bound to ``comm`` in ``user_ns`` (the
    rank's namespace): collective, so the kernel calls it on every rank at once once any rank
    says COMM_WORLD is revoked (an idle rank may not have seen the revocation yet); {"size",
    "library"}, None without ULFM."""
    MPI = _mpi()
    if MPI is None:
        return None
    new = _world(MPI).Shrink()
    stand_for_world(new, user_ns)
    return {"size": new.Get_size(), "library": MPI.Get_library_version().split(",")[0].strip()}


def world_communicator():
    """The communicator standing for the World now: COMM_WORLD, or what replaced it (a shrink, a
    respawn); None without ULFM."""
    MPI = _mpi()
    return None if MPI is None else _world(MPI)


def stand_for_world(new, user_ns: dict | None = None) -> None:
    """``new`` stands for the World from now on (a later unblock revokes it), as ``comm`` in the
    rank's namespace (``user_ns``, else the engine's)."""
    _STATE["world"] = new
    if user_ns is None:
        from mlp_magic.engine.bootstrap import engine_shell

        user_ns = engine_shell().user_ns
    user_ns["comm"] = new
