"""The World's calls on every engine while it starts (identify, bootstrap), and what a failed one
tells the user: one line naming the ranks, their hosts and the cause, never a RemoteError's
traceback.

A rank whose call failed (no mpi4py in its container, an import error, a wrong Python) leaves
the others waiting, often in MPI_Init for the rank that never comes. So the first failure ends
the wait: the other ranks get ``FAILED_GRACE_S`` to answer (ranks of one broken host fail
together), then the start gives up on them. The World is then stopped by its caller.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future

from mlp_magic.output.pure.grouping import ranks_label
from mlp_magic.core.ranges import fold_hosts, fold_ranks
from mlp_magic.errors import MlpMagicError
from mlp_magic.ranks.ipp_private import children, remote_error
from mlp_magic.ranks.waiting import Requests

FAILED_GRACE_S = 2.0   # after a rank's call failed: how long the others still have to answer


class _Settled:
    """One future per rank, done when the rank's request is, or once the start gave up on it
    (``FAILED_GRACE_S`` after a first failure): what the waiting loop waits on."""

    def __init__(self, pending: dict):
        self.futures = {rank: Future() for rank in pending}
        self._timer = None
        self._lock = threading.Lock()
        for rank, result in pending.items():
            kids = children(result)
            left = [len(kids)]
            for kid in kids:
                kid.add_done_callback(lambda kid, rank=rank, left=left: self._one_done(rank, kid, left))

    def _one_done(self, rank: int, kid, left: list) -> None:
        with self._lock:
            left[0] -= 1
            if remote_error(kid) is not None and self._timer is None:
                self._timer = threading.Timer(FAILED_GRACE_S, self._give_up)
                self._timer.daemon = True
                self._timer.start()
            if left[0] == 0 and not self.futures[rank].done():
                self.futures[rank].set_result(None)

    def _give_up(self) -> None:
        with self._lock:
            for future in self.futures.values():
                if not future.done():
                    future.set_result(None)

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()


def gather(world, pending: dict, what: str, deadline: float, step: str = "") -> dict:
    """{rank: AsyncResult} -> {rank: value}, before ``deadline`` (monotonic). Ranks whose call
    failed (``step``: what it is called then), or that do not answer (``what`` they did not
    finish), fail the start with one MlpMagicError naming them."""
    ranks = list(pending)
    settled = _Settled(pending)
    try:
        requests = Requests(world, ranks, [[settled.futures[r]] for r in ranks], track=False)
        requests.wait_all(deadline)
    finally:
        settled.close()
    failed = {rank: error for rank in ranks
              if (error := _error_of(pending[rank])) is not None}
    if failed:
        raise MlpMagicError(failure_line(failed, world.host_of, step or what, world.workdir))
    late = [rank for rank in ranks if not pending[rank].done()]
    if late:
        hosts = fold_hosts(dict.fromkeys(world.host_of(k) for k in late if k < world.np))
        why = "the World's processes ended" if world.lifeline_ended() else \
            f"within the start's limit for this size ({world.budget.total_s:.0f} s)"
        raise MlpMagicError(f"ranks {fold_ranks(late)} on {hosts} did not finish {what} {why}; "
                            f"logs in {world.workdir}")
    return {rank: pending[rank].get(0) for rank in ranks}


def _error_of(result):
    for kid in children(result):
        error = remote_error(kid)
        if error is not None:
            return error
    return None


def cause(error: BaseException) -> str:
    """A remote exception in one line: its type and message (``ImportError: libmpi.so.40: ...``),
    the last line of its traceback when it has no message."""
    name = getattr(error, "ename", None) or type(error).__name__
    value = getattr(error, "evalue", None)
    if value is None:
        value = str(error)
    text = " ".join(str(value).split())
    if not text:
        lines = [line for line in (getattr(error, "traceback", None) or "").splitlines() if line.strip()]
        text = " ".join(lines[-1].split()) if lines else ""
    return f"{name}: {text}" if text and text != name else name


def grouped_causes(causes: dict, host_of) -> str:
    """{rank: cause} -> "rank 1 on w1: X; ranks 2-3 (2) on w[2-3]: Y": each cause once."""
    by_cause: dict = {}
    for rank in sorted(causes):
        by_cause.setdefault(causes[rank], []).append(rank)
    return "; ".join(f"{ranks_label(ranks, fold_hosts(dict.fromkeys(host_of(r) for r in ranks)))}: {text}"
                     for text, ranks in by_cause.items())


def failure_line(failed: dict, host_of, step: str, workdir) -> str:
    """{rank: exception} -> one line: each cause once, with its ranks and their hosts."""
    causes = grouped_causes({rank: cause(error) for rank, error in failed.items()}, host_of)
    where = f"; logs in {workdir}" if workdir else ""
    return f"the World did not start: {step} failed on {causes}{where}"
