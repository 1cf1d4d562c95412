"""Run one cell on some ranks of a World: send once, stream, wait, time out, collect.

One ``execute`` request through the broadcast scheduler (the log directory rides along as a
trailing comment, see engine/capture), followed by the one rank-waiting loop (ranks/waiting):
it wakes when ranks finish, when one writes, and when the World loses a process. The caller
(mpirun/command) never waits longer than the timeout and survives Ctrl-C: both return what
arrived so far, with the unfinished ranks marked.
"""
from __future__ import annotations

import concurrent.futures
import enum
import re
import time

from mlp_magic.core import results as status
from mlp_magic.core.results import RankResult
from mlp_magic.world.pure.budget import interrupt_grace
from mlp_magic.engine.capture import CELL_TAG
from mlp_magic.world.guards import KEPT_RESULTS, say_once
from mlp_magic.ranks.ipp_private import children, forget_results
from mlp_magic.ranks.quiet_replies import run_seconds
from mlp_magic.ranks.waiting import Requests

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL_NUMBER = re.compile(r"(Cell |Input )?In ?\[\d*\]")


def plain_traceback(remote_error) -> str:
    """A rank's traceback as plain text, without what differs between ranks for no reason
    (colours, execution counts), so identical failures group together."""
    lines = getattr(remote_error, "traceback", None) or f"{remote_error}"
    if isinstance(lines, list):
        lines = "\n".join(lines)
    text = _CELL_NUMBER.sub("Cell", _ANSI.sub("", lines))
    # The source listing may reach our trailing tag line: it is not the user's code.
    text = "\n".join(line for line in text.split("\n") if CELL_TAG not in line)
    return text.rstrip() + "\n"


class Outcome(enum.Enum):
    """How a cell ended, as the kernel saw it."""

    DONE = "done"                # every rank finished (some may have raised)
    TIMEOUT = "timeout"          # --timeout passed: the running ranks were interrupted
    INTERRUPTED = "interrupted"  # Ctrl-C / the stop button: the running ranks were interrupted
    DIED = "died"                # an engine or the launcher went away during the cell

    @property
    def unfinished_status(self) -> str:
        """The status of a rank that had not finished when the cell ended this way."""
        return {Outcome.TIMEOUT: status.TIMEOUT, Outcome.INTERRUPTED: status.INTERRUPTED,
                Outcome.DIED: status.DIED}.get(self, status.TIMEOUT)


class CellRun:
    """One cell in flight on ``ranks``: sent once at creation, then followed until it ends."""

    def __init__(self, world, code: str, ranks: list, log_dir: str):
        self.world = world
        self.ranks: list[int] = list(ranks)
        self.log_dir = log_dir
        self.started = time.monotonic()
        targets = [world.rank_to_engine[r] for r in self.ranks]
        tagged = f"{code}\n{CELL_TAG}{log_dir}\n"
        # Through the broadcast scheduler: one request leaves the kernel, the controller fans it
        # out, instead of one serialised, signed request per rank (~0.3 ms of kernel CPU each).
        view = world.client.broadcast_view(targets=targets)
        self.async_result = view.execute(tagged, silent=False, block=False)
        # One (reply, output-complete) pair of futures per rank, in rank order.
        self._children = children(self.async_result)
        world.live.cell_started(code, self.ranks, log_dir)
        self.requests = Requests(world, self.ranks, [(c, c.output) for c in self._children], output=True)
        self._unread = set(range(len(self.ranks)))   # output that came before the wait began
        self._seen = {rank: {"stdout": 0, "stderr": 0} for rank in self.ranks}
        self.outcome: Outcome | None = None   # None while it runs
        self.interrupted = False              # SIGINT was sent to its unfinished ranks
        self.still_running: list[int] = []    # ranks still running after that SIGINT (stuck in C)
        self.death_note = ""                  # which rank died first, and how (Outcome.DIED)

    # ------------------------------------------------------------------ progress
    def _metadata(self, index: int) -> dict:
        return self._children[index].output.metadata

    def unfinished_ranks(self) -> list:
        return self.requests.unfinished()

    def done(self) -> bool:
        return self.requests.done()

    def wait(self, until: float | None) -> bool:
        """Block until every rank is done (True), or a rank wrote, the World lost a process, or
        the monotonic time ``until`` (False)."""
        return self.requests.wait(until)

    def world_ended(self) -> bool:
        return self.requests.world_ended()

    def new_output(self, every_rank: bool = False) -> list:
        """[(rank, stream name, text)] written since the last call, by the ranks that wrote
        (``every_rank``: all of them, for the last look)."""
        wrote = self._unread | self.requests.take_wrote()
        self._unread = set()
        indices = range(len(self.ranks)) if every_rank else sorted(wrote)
        chunks = []
        for i in indices:
            rank, metadata = self.ranks[i], self._metadata(i)
            for name in ("stdout", "stderr"):
                text = metadata.get(name) or ""
                start = self._seen[rank][name]
                if len(text) > start:
                    chunks.append((rank, name, text[start:]))
                    self._seen[rank][name] = len(text)
        return chunks

    # ------------------------------------------------------------------ stopping
    def interrupt(self, grace: float | None = None) -> bool:
        """SIGINT the ranks still running; True if they stopped.

        Waits until ``grace`` seconds pass with no rank stopping: 128 ranks' replies take longer
        to arrive than 4 ranks', but a rank stuck in C is given up on after ``grace`` all the same.
        The grace assumes each host has its own cores; where many ranks share few (the test bed's
        namespace hosts), a second round is sent. A rank already showing the first one's traceback
        ignores it (``engine/sigint``); one that caught KeyboardInterrupt and carried on gets it.
        """
        if self.done():
            return True
        grace = self._grace() if grace is None else grace
        self.interrupted = True
        for _ in range(2):  # again for ranks that seem not to have heard the first (see below)
            running = self.unfinished_ranks()
            if not running:
                break
            jobs = dict(zip((self.world.rank_to_engine[r] for r in running), self._msg_ids(running)))
            if not self.world.interrupt(jobs):
                return False  # reported as still running below
            self._wait_while_ranks_stop(grace)
        return self.done()

    def settle(self) -> None:
        """Before a later cell is refused: ranks interrupted a moment ago may still be on their
        way out (building tracebacks on a busy host), so wait while they keep finishing."""
        if not self.done():
            self._wait_while_ranks_stop(self._grace())

    def _grace(self) -> float:
        return interrupt_grace(self.world.ranks_per_cpu)

    def _msg_ids(self, ranks: list) -> list:
        index = {rank: i for i, rank in enumerate(self.ranks)}
        return [self.async_result.msg_ids[index[rank]] for rank in ranks]

    def _wait_while_ranks_stop(self, grace: float) -> None:
        self.requests.wait_while_stopping(grace)

    def release(self) -> None:
        """Let the client forget this finished cell; else memory grows cell after cell (64
        ranks printing a line each: ~1 MiB a cell). It keeps each rank's result and output, the
        broadcast request's own futures (never answered as such), and ipyparallel's AsyncResult
        memoises ``len`` in a class-wide lru_cache that holds the last 128 AsyncResults alive."""
        if not forget_results(self.world.client, self.async_result):
            say_once(self.world.notice, KEPT_RESULTS)
        self.world.live.cell_ended(self.log_dir)

    # ------------------------------------------------------------------ results
    def results(self, unfinished_status: str = status.TIMEOUT) -> list:
        self._unfinished_at_results = set(self.unfinished_ranks())
        return [self._result(i, rank, unfinished_status) for i, rank in enumerate(self.ranks)]

    def _result(self, index: int, rank: int, unfinished_status: str) -> RankResult:
        metadata = self._metadata(index)
        result = RankResult(rank=rank, host=self.world.host_of(rank),
                            stdout=metadata.get("stdout") or "", stderr=metadata.get("stderr") or "")
        child = self._children[index]
        if rank in self._unfinished_at_results:
            result.status = unfinished_status
        else:
            error = metadata.get("error") or _child_exception(child) or _error_result(child)
            if error is not None:
                result.status = _error_status(error)
                # A dead engine's "traceback" is ipyparallel's bookkeeping, not the rank's:
                # the cell's note says which rank died and how.
                result.error = "" if result.status == status.DIED else plain_traceback(error)
        result.displays = list(metadata.get("outputs") or [])
        if metadata.get("execute_result"):
            result.displays.append(metadata["execute_result"])
        result.duration = run_seconds(metadata)
        return result


def _child_exception(child):
    try:
        return child.exception(timeout=0)
    except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
        return None


def _error_result(child):
    """A dead engine's task resolves to an EngineError *value*, not a raised one."""
    try:
        value = child.result(timeout=0)
    except Exception:  # already covered by _child_exception
        return None
    return value if isinstance(value, BaseException) else None


def _error_status(error) -> str:
    name = getattr(error, "ename", type(error).__name__)
    if name == "KeyboardInterrupt":
        return status.INTERRUPTED
    if name in ("EngineError",) or "EngineError" in type(error).__name__:
        return status.DIED
    return status.ERROR
