"""One ``%%mpirun`` cell in flight: a RankJob of the CELL kind, its output as it comes, its results.

The code goes out once, with the log directory riding along as a trailing comment (engine/capture
tees every byte there). The job's waiting loop wakes when ranks finish, when one writes, and
when the World loses a process; this module reads what arrived and turns it into RankResults.
"""
from __future__ import annotations

import concurrent.futures
import enum
import time

from mlp_magic.core import results as status
from mlp_magic.core.records import Record
from mlp_magic.core.results import RankResult
from mlp_magic.engine.capture import CELL_TAG
from mlp_magic.client.job import RankJob
from mlp_magic.client.quiet_replies import run_seconds
from mlp_magic.client.remote_errors import traceback_text
from mlp_magic.world.guards import KEPT_RESULTS, say_once
from mlp_magic.mpirun.forwarded_displays import ForwardedDisplays
from mlp_magic.mpirun.rank_displays import RankDisplays
from mlp_magic.output.pure import rewrites


STREAMS = ("stdout", "stderr")
QUIT_TEXT = "quit at the debugger\n"


class Outcome(enum.Enum):
    """How a cell ended, as the kernel saw it."""

    DONE = "done"                # every rank finished (some may have raised)
    TIMEOUT = "timeout"          # --timeout passed: the running ranks were interrupted
    INTERRUPTED = "interrupted"  # Ctrl-C / the stop button: the running ranks were interrupted
    DIED = "died"                # an engine or the launcher went away during the cell
    HOST_LOST = "host lost"      # a host stopped answering (world/host_watch): the others interrupted
    RANK_DIED = "rank died"      # ranks died, the others live on (ULFM): those still running interrupted
    PAUSED = "paused"            # every rank still running stopped at a breakpoint: it goes on later

    @property
    def unfinished_status(self) -> str:
        """The status of a rank that had not finished when the cell ended this way."""
        return {Outcome.TIMEOUT: status.TIMEOUT, Outcome.INTERRUPTED: status.INTERRUPTED,
                Outcome.DIED: status.DIED, Outcome.HOST_LOST: status.INTERRUPTED,
                Outcome.RANK_DIED: status.INTERRUPTED,
                Outcome.PAUSED: status.PAUSED}.get(self, status.TIMEOUT)


class Ending(Record, frozen=True):
    """How one follow of a cell ended (mpirun/run makes it; show, the debugger and the World read
    it): ``still_running``: ranks still running after the interrupt (stuck in C);
    ``death_note``: which rank died first, and how (or, the cell done, that ranks failed in a
    collective with ranks already dead); ``quit``: the debugger was told to quit;
    ``badly``: a rank failed, or still runs (unblocked, maybe)."""

    outcome: Outcome
    still_running: tuple = ()
    death_note: str = ""
    quit: bool = False
    badly: bool = False


class Cell:
    """The cell ``code`` on ``ranks`` of ``world``: sent at creation, then followed until it ends."""

    def __init__(self, world, code: str, ranks: list, log_dir: str, args=None):
        self.world = world
        self.log_dir = log_dir
        self.code, self.args = code, args   # kept: a debugger command follows the cell again
        self.displays = RankDisplays(ranks)   # widgets, displays updated in place (RankJob's order)
        self.job = RankJob.execute(world, ranks, f"{code}\n{CELL_TAG}{log_dir}\n",
                                   before_wait=lambda: world.live.cell_started(code, ranks, log_dir),
                                   on_display=self.displays.take)
        self.ranks = self.job.ranks
        # one for the cell's whole life: after a pause at a breakpoint the same slots are updated
        self.forwarded = ForwardedDisplays(self.ranks, bool(args is not None and args.all_outputs))
        self.started = self.job.started
        self._unread = set(range(len(self.ranks)))   # output that came before the wait began
        # where each stream was read to (the client rewrites a line a rank rewrote with \r)
        self._seen = {rank: {"stdout": rewrites.Seen(), "stderr": rewrites.Seen()} for rank in self.ranks}
        self.ending: Ending | None = None     # None while it runs (``ended``)
        self.shown_upto: dict = {}            # {rank: (stdout, stderr) lengths} shown when it paused
        self.finished_shown: frozenset = frozenset()   # ranks whose end was shown when it paused

    def ended(self, ending: Ending) -> None:
        """How its follow ended (mpirun/run, the one writer)."""
        self.ending = ending

    @property
    def ended_badly(self) -> bool:
        """What the World asks of its busy job: a rank failed, or still runs (unblocked, maybe)."""
        return self.ending is not None and self.ending.badly

    # ------------------------------------------------------------------ what the World asks a busy job
    def unfinished_ranks(self) -> list:
        return self.job.unfinished_ranks()

    def settle(self) -> None:
        if not self.paused_ranks():   # stopped ranks stay stopped: nothing to wait for
            self.job.settle()

    # ------------------------------------------------------------------ breakpoints
    def paused_ranks(self) -> dict:
        """{rank: where it stopped} of the ranks stopped at a breakpoint."""
        return {self.ranks[i]: dict(content.get("where") or {}, stop=content.get("stop", 0))
                for i, content in sorted(self.job.requests.paused.items())}

    def index_of(self, rank: int) -> int:
        return self.ranks.index(rank)

    def mark_shown(self, finished: list) -> None:
        """What each rank wrote so far was shown, and the end of the ``finished`` ones (the cell
        paused): a command that moves the ranks on shows what follows."""
        self.shown_upto = {rank: tuple(len(self._metadata(i).get(name) or "") for name in STREAMS)
                           for i, rank in enumerate(self.ranks)}
        self.finished_shown = self.finished_shown | frozenset(finished)

    def wait_while_freed(self, ranks: list, grace: float) -> None:
        self.job.wait_while_freed(ranks, grace)

    def finished_at(self, rank: int) -> float | None:
        return self.job.finished_at(rank)

    def release(self) -> None:
        """Let the client forget the finished cell (else memory grows cell after cell: 64 ranks
        printing a line each, ~1 MiB a cell); the panel's record says it ended."""
        # a dead rank's request stays outstanding (ipyparallel keeps it): not a moved table
        if not self.job.release() and not self.world.dead_ranks.keys() & set(self.ranks):
            say_once(self.world.notice, KEPT_RESULTS)
        self.world.live.cell_ended(self.log_dir)

    # ------------------------------------------------------------------ output
    def _metadata(self, index: int) -> dict:
        return self.job.futures[index].output.metadata

    def new_output(self, every_rank: bool = False) -> list:
        """[(rank, stream name, text)] written since the last call, by the ranks that wrote
        (``every_rank``: all of them, for the last look)."""
        wrote = self._unread | self.job.requests.take_wrote()
        self._unread = set()
        indices = range(len(self.ranks)) if every_rank else sorted(wrote)
        chunks = []
        for i in indices:
            rank, metadata = self.ranks[i], self._metadata(i)
            for name in ("stdout", "stderr"):
                text = metadata.get(name) or ""
                new, self._seen[rank][name] = rewrites.new_text(text, self._seen[rank][name])
                if new:
                    chunks.append((rank, name, new))
        return chunks

    # ------------------------------------------------------------------ results
    def results(self, unfinished_status: str = status.TIMEOUT) -> list:
        unfinished = set(self.unfinished_ranks())
        return [self._result(i, rank, unfinished_status if rank in unfinished else None)
                for i, rank in enumerate(self.ranks)]

    def _result(self, index: int, rank: int, unfinished_status: str | None) -> RankResult:
        metadata = self._metadata(index)
        result = RankResult(rank=rank, host=self.world.host_of(rank),
                            stdout=metadata.get("stdout") or "", stderr=metadata.get("stderr") or "")
        child = self.job.futures[index]
        if unfinished_status is not None:
            result.status = unfinished_status
        else:
            error = metadata.get("error") or _child_exception(child) or _error_result(child)
            if error is not None:
                result.status = _error_status(error)
                # A dead engine's "traceback" is ipyparallel's bookkeeping, not the rank's:
                # the cell's note says which rank died and how.
                result.error = "" if result.status == status.DIED else \
                    QUIT_TEXT if result.status == status.QUIT else traceback_text(error)
        result.displays = self.displays.shown(index, list(metadata.get("outputs") or []))
        if metadata.get("execute_result"):
            result.displays.append(metadata["execute_result"])
        # A rank still running when the cell ended (stuck in C) has no count of its own: how long
        # it had run by then, on the kernel's clock.
        result.duration = run_seconds(metadata) if unfinished_status is None else \
            time.monotonic() - self.started
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
    if name == "BdbQuit":   # pdb's quit, from `%mpirun --pdb q` or Ctrl-C while stopped
        return status.QUIT
    if name in ("EngineError",) or "EngineError" in type(error).__name__:
        return status.DIED
    return status.ERROR
