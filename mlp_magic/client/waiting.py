"""The one loop that waits on ranks: requests of ours in flight, woken by events, never by a clock.

Every wait of the kernel on its ranks goes through ``Requests``, held by the RankJob that sent the
requests (client/job: a cell, a call, ``%allrun`` through the engines, the World's start, its
chores). A request on a rank is one or more
futures of ipyparallel's client (its reply, and for cells its output, complete on the rank's
'idle'). Their callbacks run on the client's IO thread: they count the request down, note that a
rank wrote, and wake the waiter; the World's lifeline (world/lifeline) wakes it when the
controller or the launcher ends. So a wait costs nothing while nothing happens, at any number of
ranks, and returns the moment something does.

The same callbacks keep the World's rank states (``world.live``, world/live): busy from the
moment a request is sent, idle once it is done, dead with its engine, and when each rank last
wrote. The panel's rank view is this loop's view.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from mlp_magic.client.ipp_private import is_engine_death, on_iopub

OUTPUT_MESSAGES = frozenset({"stream", "display_data", "execute_result", "error"})
PAUSED = "mlp_paused"   # a rank stopped at a breakpoint (debugging/rank/breakpoints.PAUSED)
DISPLAY_MESSAGES = ("comm_open", "comm_msg", "comm_close", "display_data", "update_display_data",
                    "clear_output")
DISPLAY_WAKES_EVERY_S = 0.5   # these wake the wait at most this often (tqdm's widget: 10 a second a rank)


class Requests:
    """Requests in flight: ``futures[i]`` are the futures of the request sent to ``ranks[i]``.

    ``track``: keep the World's rank states (busy, idle, dead, last output); off for the World's
    own start, whose ranks are "starting". ``output``: a rank's new output ends a ``wait`` (the
    caller forwards it); without it, only the end of every request, the deadline or the World's
    end do. ``on_display(index, kind, content)``: told each of ``DISPLAY_MESSAGES`` of an output
    request (a widget's comm messages, a display, its update, a clearing), on the IO thread; they
    wake the wait at most every ``DISPLAY_WAKES_EVERY_S``, and one that came in between wakes it
    when that time is up.
    """

    def __init__(self, world, ranks: Sequence[int], futures: Sequence[Sequence], *, track: bool = True,
                 output: bool = False, on_display=None):
        self.world = world
        self.ranks = list(ranks)
        self._live = world.live if track else None
        self._woken = threading.Event()
        self._news = False   # a watcher's: the wait returns (news())
        self._lock = threading.Lock()
        self._left = [len(group) for group in futures]
        self._unfinished = sum(1 for n in self._left if n)
        self._wrote: set = set()           # indices whose rank wrote since take_wrote()
        self.paused: dict = {}             # index -> where its rank stopped ({"stop": n, "where": ...})
        self.finished_at: dict = {}        # index -> when its rank's request ended (monotonic)
        self._resumed: dict = {}           # index -> the last stop a command moved it on from
        self.wakes = 0                     # how often a wait woke up (no events: none)
        self._on_display, self._display_woke = on_display, 0.0
        self._display_due: float | None = None   # one came that did not wake the wait: wake by then
        if self._live is not None:
            self._live.sent(self.ranks)
        world.wake_when_a_process_ends(self)
        for index, group in enumerate(futures):
            if output and group:   # the reply's future gets its request's iopub messages
                on_iopub(group[0], lambda msg, index=index: self._on_iopub(index, msg))
            for future in group:
                future.add_done_callback(lambda future, index=index: self._on_done(index, future))

    # ----------------------------------------------------------------- callbacks (client IO thread)
    def _on_done(self, index: int, future) -> None:
        with self._lock:
            if self._left[index] == 1:   # said before it counts as finished: a reader never misses it
                self.finished_at[index] = time.monotonic()
            self._left[index] -= 1
            finished = self._left[index] == 0
            if finished:
                self._unfinished -= 1
                self.paused.pop(index, None)
        if self._live is not None:
            if is_engine_death(future):
                self._live.died([self.ranks[index]])
            elif finished:
                self._live.ended(self.ranks[index])
        if finished:
            self._woken.set()

    def _on_iopub(self, index: int, msg: dict) -> None:
        kind = msg.get("header", {}).get("msg_type")
        if kind == PAUSED:
            self.stopped(index, msg.get("content") or {})
            return
        if kind in DISPLAY_MESSAGES and self._on_display is not None:
            self._display(index, kind, msg.get("content") or {})
            if kind not in OUTPUT_MESSAGES:
                return
        if kind not in OUTPUT_MESSAGES:
            return
        self._wrote.add(index)
        if self._live is not None:
            self._live.wrote(self.ranks[index])
        self._woken.set()

    def _display(self, index: int, kind: str, content: dict) -> None:
        self._on_display(index, kind, content)
        now = time.monotonic()
        if now - self._display_woke >= DISPLAY_WAKES_EVERY_S:
            self._display_woke, self._display_due = now, None
            self.news()
        elif self._display_due is None:   # the last before a quiet spell is not left unseen
            self._display_due = self._display_woke + DISPLAY_WAKES_EVERY_S
            self._woken.set()   # the wait counts it in its time

    def stopped(self, index: int, content: dict) -> None:
        """Rank ``index`` stopped at a breakpoint (its iopub message, or a debugger's reply);
        a stop older than the last one a command moved it on from is stale."""
        with self._lock:
            if content.get("stop", 0) <= self._resumed.get(index, 0) or not self._left[index]:
                return
            self.paused[index] = content
        if self._live is not None:
            self._live.paused(self.ranks[index])
        self.news()

    def resumed(self, indices) -> None:
        """A command moves these ranks on (``n``, ``c``...): they run until they stop again."""
        with self._lock:
            for index in indices:
                stop = self.paused.pop(index, {}).get("stop", 0)
                self._resumed[index] = max(self._resumed.get(index, 0), stop)
        if self._live is not None:
            self._live.resumed([self.ranks[i] for i in indices])

    def all_paused(self) -> bool:
        """Every rank still running is stopped at a breakpoint (and one is)."""
        with self._lock:
            running = [i for i, left in enumerate(self._left) if left]
            return bool(running) and all(i in self.paused for i in running)

    def wake(self) -> None:
        """From the World's lifeline: one of its processes ended."""
        self._woken.set()

    def news(self) -> None:
        """From a watcher of the waiting side's (world/host_watch: a host gone quiet): the wait
        returns, for its caller to look."""
        self._news = True
        self._woken.set()

    # ----------------------------------------------------------------- the waiting side
    def unfinished(self) -> list:
        """The ranks whose request is not over, in the order given."""
        return [rank for rank, left in zip(self.ranks, self._left) if left]

    def done(self) -> bool:
        return self._unfinished == 0

    def take_wrote(self) -> set:
        """The indices (into ``ranks``) of the ranks that wrote since the last call."""
        wrote, self._wrote = self._wrote, set()
        return wrote

    def world_ended(self) -> bool:
        return self.world.lifeline_ended()

    def wait(self, until: float | None = None) -> bool:
        """Block until every request is done (True), or new output (with ``output``), the World's
        end or the monotonic time ``until`` (False). Ctrl-C raises KeyboardInterrupt."""
        while True:
            self._woken.clear()
            if self.done():
                return True
            if self._wrote or self.world_ended() or self._news:
                self._news = False
                return False
            now, due = time.monotonic(), self._display_due
            if due is not None and now >= due:
                self._display_woke, self._display_due = now, None
                return False
            ends = [t - now for t in (until, due) if t is not None]
            left = min(ends) if ends else None
            if until is not None and until <= now:
                return False
            self._woken.wait(left)
            self.wakes += 1

    def wait_all(self, until: float | None = None) -> bool:
        """Block until every request is done (True), the World's end or ``until`` (False)."""
        while not self.wait(until):
            self.take_wrote()
            if self.world_ended() or (until is not None and time.monotonic() >= until):
                return self.done()
        return True

    def wait_done(self, until: float) -> bool:
        """Block until every request is done (True) or the monotonic time ``until`` (False),
        whatever else wakes the wait meanwhile (output, the World's end)."""
        while True:
            self._woken.clear()
            if self.done():
                return True
            left = until - time.monotonic()
            if left <= 0:
                return False
            self._woken.wait(left)
            self.wakes += 1

    def wait_while_stopping(self, grace: float, ranks: Sequence[int] | None = None) -> None:
        """After an interrupt (or an unblock): wait while ranks keep finishing, up to ``grace``
        seconds after the last one did (a rank stuck in C is given up on then); ``ranks``: only
        theirs count."""
        wanted = None if ranks is None else set(ranks)

        def left_now() -> int:
            return self._unfinished if wanted is None else len(wanted.intersection(self.unfinished()))
        left, until = left_now(), time.monotonic() + grace
        while left_now() and not self.world_ended():
            self._woken.clear()
            if left_now() != left:
                left, until = left_now(), time.monotonic() + grace
                continue
            remaining = until - time.monotonic()
            if remaining <= 0:
                return
            self._woken.wait(remaining)
