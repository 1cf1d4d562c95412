"""Call one of our engine functions on some ranks and wait for every answer (--compare, --pull...).

A call is one request through the broadcast scheduler when every rank gets the same arguments,
else one request per rank. The wait ends at the timeout or on Ctrl-C: the ranks still busy are
interrupted, and if some do not stop (stuck in C), the call becomes the World's ``active_run``
so that a later cell is refused instead of queueing behind it, as after a cell that timed out.
"""
from __future__ import annotations

import time

from mlp_magic.core.ranges import fold_ranks
from mlp_magic.world.pure.budget import interrupt_grace
from mlp_magic.errors import MlpMagicError
from mlp_magic.ranks.ipp_private import children, forget_results
from mlp_magic.ranks.waiting import Requests


class Failed:
    """A rank's call that raised or could not be answered (its engine died, a value that
    ipyparallel could not deserialise): ``message`` says what."""

    def __init__(self, message: str):
        self.message = message

    def __repr__(self) -> str:
        return f"Failed({self.message!r})"


def call(world, ranks: list, function, *args, timeout: float | None = None, what: str = "") -> dict:
    """{rank: answer} of ``function(*args)`` on every rank of ``ranks`` (one broadcast request)."""
    view = world.client.broadcast_view(targets=[world.rank_to_engine[r] for r in ranks])
    pending = RankCall(world, list(ranks), [view.apply_async(function, *args)])
    return pending.answers(timeout, what)


def call_each(world, arguments: dict, function, timeout: float | None = None, what: str = "",
              track: bool = True) -> dict:
    """{rank: answer} of ``function(*arguments[rank])`` on each rank (one request per rank);
    ``track``: the ranks show busy meanwhile (off for the World's own work at its start)."""
    ranks = list(arguments)
    results = [world.client[world.rank_to_engine[r]].apply_async(function, *arguments[r]) for r in ranks]
    return RankCall(world, ranks, results, track=track).answers(timeout, what)


class RankCall:
    """Requests in flight on ``ranks``; has what ``World.active_run`` needs (settle,
    unfinished_ranks, release) when some ranks must be remembered as busy."""

    def __init__(self, world, ranks: list, async_results: list, track: bool = True):
        self.world = world
        self.ranks = ranks
        self.async_results = async_results
        self._futures = [child for result in async_results for child in children(result)]
        self.requests = Requests(world, ranks, [[future] for future in self._futures], track=track)

    def unfinished_ranks(self) -> list:
        return self.requests.unfinished()

    def settle(self) -> None:
        self._wait_while_stopping()

    def release(self) -> None:
        for result in self.async_results:
            forget_results(self.world.client, result)

    def answers(self, timeout: float | None, what: str) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        interrupted = False
        try:
            self.requests.wait_all(deadline)
        except KeyboardInterrupt:
            interrupted = True
        late = self.unfinished_ranks()
        if late:
            self._stop(late)
            how = "was interrupted" if interrupted else f"timed out after {timeout:g} s" \
                if deadline is not None else "lost ranks (the World stopped)"
            raise MlpMagicError(f"{what or 'the call'} {how}: ranks {fold_ranks(late)} did not answer"
                                + self._stuck_note())
        found = {rank: _answer(future) for rank, future in zip(self.ranks, self._futures)}
        self.release()
        return found

    def _stop(self, late: list) -> None:
        jobs = {self.world.rank_to_engine[rank]: future.msg_id
                for rank, future in zip(self.ranks, self._futures) if rank in late}
        if self.world.interrupt(jobs):
            self._wait_while_stopping()
        if self.unfinished_ranks():
            self.world.active_run = self   # later cells are refused while these ranks are busy
        else:
            self.release()

    def _wait_while_stopping(self) -> None:
        self.requests.wait_while_stopping(interrupt_grace(self.world.ranks_per_cpu))

    def _stuck_note(self) -> str:
        stuck = self.unfinished_ranks()
        if not stuck:
            return "; they were interrupted and the World is still usable"
        return (f"; ranks {fold_ranks(stuck)} did not stop on SIGINT: `%mpirun --stacks` shows where, "
                "`%mpirun --restart` starts the World again")


def _answer(future):
    try:
        value = future.result(timeout=0)
    except Exception as exc:   # raised on the rank, or the engine died
        return Failed(_error_text(exc))
    return Failed(_error_text(value)) if isinstance(value, BaseException) else value


def _error_text(error) -> str:
    name = getattr(error, "ename", None) or type(error).__name__
    value = getattr(error, "evalue", None)
    value = str(error) if value is None else value
    line = f"{name}: {value}".strip().splitlines()
    return line[0] if line else name
