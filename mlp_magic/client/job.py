"""A RankJob: requests of ours in flight on some ranks of a World, the one way the kernel reaches them.

A job is sent once (an ``execute`` for a cell, an ``apply`` of one of our functions), followed
by the one waiting loop (client/waiting: woken by events, never by a clock), stopped by an
interrupt, and released when done. Its ``Kind`` says what the ranks' states show and when the
wait may give up:

- ``CELL``: the user's cell; the ranks show busy, their output wakes the wait.
- ``SHELL``: ``%allrun`` through the engines; the same.
- ``CALL``: one of our functions on the ranks for the user (``--compare``, ``--pull``...).
- ``START``: the World's own calls while it starts (identify, bootstrap): the ranks are
  "starting", and a first failure ends the wait ``FAILED_GRACE_S`` later (ranks of one broken
  host fail together; the others often wait in MPI_Init for a rank that never comes).
- ``CHORE``: the World's housekeeping (GPU probes for the panel, starting the agents): the
  ranks' states are left alone, it is not the user's work.

``call`` and ``call_each`` are the user's calls: an answer per rank, or one error line naming the
ranks that did not answer; ranks that stay busy become the World's ``busy_job``, so that later
cells are refused rather than queued behind them.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from mlp_magic.core.ranges import fold_ranks, rank_words
from mlp_magic.core.records import Record
from mlp_magic.errors import MlpMagicError
from mlp_magic.client.ipp_private import children, forget_results, remote_error
from mlp_magic.client.remote_errors import Failed, one_line
from mlp_magic.client.waiting import Requests
from mlp_magic.unblock.pure.report import HUNG_HINT
from mlp_magic.world.pure.budget import interrupt_grace, second_round_grace

FAILED_GRACE_S = 2.0   # at start: after a rank's call failed, how long the others still have


class Kind(Record):
    name: str = ""
    track: bool = True              # the ranks show busy while it runs (the user's work)
    output: bool = False            # each request's output completes it too, and wakes the wait
    give_up_after_failure_s: float | None = None   # a first failure ends the wait this much later


CELL = Kind(name="cell", output=True)
SHELL = Kind(name="shell", output=True)
CALL = Kind(name="call")
START = Kind(name="start", track=False, give_up_after_failure_s=FAILED_GRACE_S)
CHORE = Kind(name="chore", track=False)


class RankJob:
    """Requests in flight on ``ranks``: ``async_results`` hold one child future per rank, in
    rank order (one broadcast request, or one request per rank)."""

    def __init__(self, world, kind: Kind, ranks: list, async_results: list, on_display=None):
        self.world = world
        self.kind = kind
        self.ranks = list(ranks)
        self.async_results = list(async_results)
        self.futures = [child for result in self.async_results for child in children(result)]
        self._index = {rank: i for i, rank in enumerate(self.ranks)}
        self.started = time.monotonic()
        self.ended_badly = False   # given up on with ranks still running (the World's busy_job)
        self._settled = _Settled(self.futures, kind.give_up_after_failure_s) \
            if kind.give_up_after_failure_s else None
        waited = [[f] for f in self._settled.futures] if self._settled else \
            [[f, f.output] if kind.output else [f] for f in self.futures]
        self.requests = Requests(world, self.ranks, waited, track=kind.track, output=kind.output,
                                 on_display=on_display)

    # ------------------------------------------------------------------ sending
    @classmethod
    def execute(cls, world, ranks: list, code: str, kind: Kind = CELL, before_wait=None,
                on_display=None) -> "RankJob":
        """``code`` as a cell on every rank: one request through the broadcast scheduler (the
        controller fans it out, not one serialised, signed request per rank from the kernel).
        ``before_wait()`` runs once the request left, before its ranks show busy; ``on_display``:
        client/waiting's."""
        view = world.client.broadcast_view(targets=[world.rank_to_engine[r] for r in ranks])
        sent = view.execute(code, silent=False, block=False)
        if before_wait is not None:
            before_wait()
        return cls(world, kind, ranks, [sent], on_display=on_display)

    @classmethod
    def apply(cls, world, kind: Kind, ranks: list, function, *args) -> "RankJob":
        """``function(*args)`` on every rank of ``ranks`` that lives: one broadcast request."""
        ranks = [rank for rank in ranks if rank not in world.dead_ranks]
        view = world.client.broadcast_view(targets=[world.rank_to_engine[r] for r in ranks])
        return cls(world, kind, ranks, [view.apply_async(function, *args)])

    @classmethod
    def apply_each(cls, world, kind: Kind, arguments: dict, function) -> "RankJob":
        """``function(*arguments[rank])`` on each rank that lives: one request per rank."""
        ranks = [rank for rank in arguments if rank not in world.dead_ranks]
        sent = [world.client[world.rank_to_engine[r]].apply_async(function, *arguments[r]) for r in ranks]
        return cls(world, kind, ranks, sent)

    # ------------------------------------------------------------------ waiting
    def unfinished_ranks(self) -> list:
        return self.requests.unfinished()

    def done(self) -> bool:
        return self.requests.done()

    def wait(self, until: float | None) -> bool:
        """Until every rank is done (True), or a rank wrote (output kinds), the World lost a
        process, or the monotonic time ``until`` (False)."""
        return self.requests.wait(until)

    def wait_all(self, until: float | None) -> bool:
        try:
            return self.requests.wait_all(until)
        finally:
            if self._settled is not None:
                self._settled.close()

    def wait_while_freed(self, ranks: list, grace: float) -> None:
        """Until every rank of ``ranks`` is done, or ``grace`` seconds pass with none of them
        finishing (ranks sharing few cores come free one after another: 64 on 2 cores take
        longer than any fixed bound; a rank that cannot come free is given up on all the same)."""
        self.requests.wait_while_stopping(grace, ranks)

    def world_ended(self) -> bool:
        return self.requests.world_ended()

    def unanswered(self) -> list:
        """The ranks whose request has no reply yet (the waiting loop may have given up on them)."""
        return [rank for rank, future in zip(self.ranks, self.futures) if not future.done()]

    def finished_at(self, rank: int) -> float | None:
        """When ``rank``'s request ended (monotonic), or None while it runs."""
        return self.requests.finished_at.get(self._index[rank])

    def msg_id(self, rank: int) -> str:
        return self.futures[self._index[rank]].msg_id

    # ------------------------------------------------------------------ stopping
    def interrupt(self, grace: float | None = None, skip: frozenset = frozenset()) -> bool:
        """Stop the ranks still running; True if they stopped.

        Waits until ``grace`` seconds pass with no rank stopping: 128 ranks' replies take longer
        to arrive than 4 ranks', but a rank stuck in C is given up on after ``grace`` all the
        same. The grace assumes each host has its own cores; where many ranks share few (the test
        bed's namespace hosts), a second round is sent. A rank already showing the first one's
        traceback ignores it (``engine/sigint``); one that caught KeyboardInterrupt gets it.
        """
        grace = interrupt_grace(self.world.ranks_per_cpu) if grace is None else grace
        before = None
        for _ in range(2):   # again for ranks that seem not to have heard the first
            running = [rank for rank in self.unfinished_ranks() if rank not in skip]   # skip: unreachable
            if not running:
                break
            jobs = {self.world.rank_to_engine[rank]: self.msg_id(rank) for rank in running}
            if not self.world.interrupt(jobs):
                return False
            self.requests.wait_while_stopping(   # only theirs: a skipped rank (dead) never ends
                grace if before is None
                else second_round_grace(grace, before, len(running), self.world.ranks_per_cpu), running)
            before = len(running)
        return self.done()

    def settle(self) -> None:
        """Ranks interrupted a moment ago may still be on their way out (building tracebacks on a
        busy host): wait while they keep finishing."""
        if not self.done():
            self.requests.wait_while_stopping(interrupt_grace(self.world.ranks_per_cpu))

    def abort_unfinished(self) -> None:
        """Drop the requests still queued (a busy engine must not pile them up); never waits."""
        for result in self.async_results:
            if not result.ready():
                try:
                    self.world.client.abort(result, block=False)
                except Exception:  # noqa: BLE001 - the engine may be gone: nothing left to drop
                    pass

    def release(self) -> bool:
        """Let the client forget this finished job (else memory grows cell after cell); False
        where its tables moved (the results then stay)."""
        return all([forget_results(self.world.client, result) for result in self.async_results])

    # ------------------------------------------------------------------ answers
    def error(self, rank: int):
        """The exception rank's request ended with, or None."""
        return remote_error(self.futures[self._index[rank]])

    def answers(self) -> dict:
        """{rank: value} of the finished ranks; a rank whose call raised, or could not be
        answered (its engine died, a value ipyparallel could not load), gets a ``Failed``."""
        found = {}
        for rank, future in zip(self.ranks, self.futures):
            if not future.done():
                continue
            try:
                value = future.result(timeout=0)
            except Exception as exc:   # raised on the rank, or the engine died
                value = exc
            found[rank] = Failed(one_line(value)) if isinstance(value, BaseException) else value
        return found


class _Settled:
    """One future per rank, done when the rank's request is, or once the wait gave up on it
    (``grace`` seconds after a first failure)."""

    def __init__(self, futures: list, grace: float):
        self.futures = [Future() for _ in futures]
        self._grace = grace
        self._timer = None
        self._lock = threading.Lock()
        for settled, future in zip(self.futures, futures):
            future.add_done_callback(lambda future, settled=settled: self._one_done(settled, future))

    def _one_done(self, settled: Future, future) -> None:
        with self._lock:
            if remote_error(future) is not None and self._timer is None:
                self._timer = threading.Timer(self._grace, self._give_up)
                self._timer.daemon = True
                self._timer.start()
            if not settled.done():
                settled.set_result(None)

    def _give_up(self) -> None:
        with self._lock:
            for future in self.futures:
                if not future.done():
                    future.set_result(None)

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()


# ---------------------------------------------------------------------- the user's calls
def call(world, ranks: list, function, *args, timeout: float | None = None, what: str = "") -> dict:
    """{rank: answer} of ``function(*args)`` on every rank of ``ranks`` (one broadcast request)."""
    return answers_of(RankJob.apply(world, CALL, ranks, function, *args), timeout, what)


def call_each(world, arguments: dict, function, timeout: float | None = None, what: str = "",
              kind: Kind = CALL) -> dict:
    """{rank: answer} of ``function(*arguments[rank])`` on each rank (one request per rank)."""
    return answers_of(RankJob.apply_each(world, kind, arguments, function), timeout, what)


def answers_of(job: RankJob, timeout: float | None, what: str) -> dict:
    """Every rank's answer within ``timeout`` (Ctrl-C ends the wait too); the ranks still busy
    then are interrupted, and one MlpMagicError names them."""
    deadline = None if timeout is None else time.monotonic() + timeout
    interrupted = False
    try:
        job.wait_all(deadline)
    except KeyboardInterrupt:
        interrupted = True
    late = job.unfinished_ranks()
    if late:
        job.interrupt()
        if job.unfinished_ranks():
            job.ended_badly = True
            job.world.claim(job)   # later cells are refused while these ranks are busy
        else:
            job.release()
        how = "was interrupted" if interrupted else f"timed out after {timeout:g} s" \
            if deadline is not None else "lost ranks (the World stopped)"
        raise MlpMagicError(f"{what or 'the call'} {how}: ranks {fold_ranks(late)} did not answer"
                            + _stuck_note(job))
    found = job.answers()
    job.release()
    return found


def _stuck_note(job: RankJob) -> str:
    stuck = job.unfinished_ranks()
    if not stuck:
        return "; they were interrupted and the World is still usable"
    return f"; {rank_words(stuck)} did not stop on SIGINT: `%mpirun --stacks` shows where; {HUNG_HINT}"
