"""Every rank's state in a World, and what the faces say of it. Pure: times are given, never read.

``RankStates`` is changed by the kernel's one rank-waiting loop (``client/waiting``): a rank is
``busy`` from the moment a request of ours is sent to it until its answer and its output are in,
``paused`` while it is stopped at a breakpoint inside one, ``idle`` otherwise, ``starting`` until
the World's start has set it up, ``dead`` once its engine or the World is gone. Each rank also
keeps when it entered its state (``since``) and when it last wrote to stdout or stderr
(``last_output``). The panel, ``mlp-magic top`` and ``status`` read the
same rows (``to_json``); ``summary_line`` and ``stragglers`` say what matters first.
"""
from __future__ import annotations

from datetime import datetime, timezone
from collections.abc import Sequence

from mlp_magic.core.ranges import fold_ranks
from mlp_magic.core.records import Record

STARTING, IDLE, BUSY, PAUSED, DEAD = "starting", "idle", "busy", "paused", "dead"
STATES = (STARTING, IDLE, BUSY, PAUSED, DEAD)
NAMED_AT_MOST = 6        # a minority of ranks is named when it has at most this many...
NAMED_TEXT_AT_MOST = 40  # ...or when its folded ranks ("0-99,128-255") are this short
LATE_AFTER_S = 2.0       # busy this long after most ranks finished: a straggler
SILENT_FACTOR = 10.0     # silent this many times longer than the others' median: a straggler
SILENT_AT_LEAST_S = 30.0


def iso(seconds: float | None) -> str | None:
    """Epoch seconds as ISO 8601 UTC with milliseconds (None stays None)."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


class RankState(Record):
    rank: int
    host: str
    state: str = STARTING
    since: float = 0.0
    last_output: float | None = None
    requests: int = 0        # requests of ours running on the rank now

    def to_json(self) -> dict:
        return {"rank": self.rank, "host": self.host, "state": self.state, "since": iso(self.since),
                "last_output": iso(self.last_output)}


class RankStates:
    """The rows of one World's ranks, in rank order; ``version`` grows with every change of state
    (not with output: ``output_version`` counts those, so a publisher can treat them apart)."""

    def __init__(self, hosts: Sequence[str], now: float):
        self.rows = [RankState(rank, host, STARTING, now) for rank, host in enumerate(hosts)]
        self.version = 0
        self.output_version = 0

    def _set(self, row: RankState, state: str, now: float) -> None:
        if row.state != state:
            row.state, row.since = state, now
            self.version += 1

    def ready(self, now: float) -> None:
        """The start is over: every rank still starting is idle."""
        for row in self.rows:
            if row.state == STARTING:
                self._set(row, IDLE, now)

    def sent(self, ranks: Sequence[int], now: float) -> None:
        """A request of ours was sent to ``ranks``: busy until it ends."""
        for rank in ranks:
            row = self.rows[rank]
            row.requests += 1
            if row.state in (IDLE, BUSY):
                self._set(row, BUSY, now)

    def ended(self, rank: int, now: float) -> None:
        """One request on ``rank`` ended: idle once none is left."""
        row = self.rows[rank]
        row.requests = max(0, row.requests - 1)
        if row.requests == 0 and row.state in (BUSY, PAUSED):
            self._set(row, IDLE, now)

    def paused(self, rank: int, now: float) -> None:
        """The rank stopped at a breakpoint, inside its request: paused until a command moves it on."""
        row = self.rows[rank]
        if row.state == BUSY:
            self._set(row, PAUSED, now)

    def resumed(self, ranks: Sequence[int], now: float) -> None:
        """A debugger command moved these paused ranks on: busy again, in the same request."""
        for rank in ranks:
            if self.rows[rank].state == PAUSED:
                self._set(self.rows[rank], BUSY, now)

    def wrote(self, rank: int, now: float) -> None:
        self.rows[rank].last_output = now
        self.output_version += 1

    def died(self, ranks: Sequence[int], now: float) -> None:
        for rank in ranks:
            self.rows[rank].requests = 0
            self._set(self.rows[rank], DEAD, now)

    def all_died(self, now: float) -> None:
        self.died(range(len(self.rows)), now)

    def revived(self, ranks: Sequence[int], now: float) -> None:
        """Dead ranks started again (``%mpirun --respawn``): idle, with nothing in flight."""
        for rank in ranks:
            if self.rows[rank].state == DEAD:
                self.rows[rank].requests = 0
                self._set(self.rows[rank], IDLE, now)

    def to_json(self) -> list[dict]:
        return [row.to_json() for row in self.rows]


# ------------------------------------------------------------------------------- what to say first
def age_text(seconds: float) -> str:
    """43 -> "43 s", 750 -> "12 min", 7500 -> "2 h 5 min"."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _by_state(rows: Sequence[RankState]) -> dict[str, list[RankState]]:
    groups: dict[str, list[RankState]] = {}
    for row in rows:
        groups.setdefault(row.state, []).append(row)
    # the largest group first; ties in the order of STATES
    return dict(sorted(groups.items(), key=lambda item: (-len(item[1]), STATES.index(item[0]))))


def _named(rows: list[RankState], total: int) -> str:
    ranks = fold_ranks(row.rank for row in rows)
    if len(rows) == total or (len(rows) > NAMED_AT_MOST and len(ranks) > NAMED_TEXT_AT_MOST):
        return ""
    return f" ({'rank' if len(rows) == 1 else 'ranks'} {ranks})"


def summary_line(rows: Sequence[RankState], now: float) -> str:
    """ "512 ranks: 510 busy 43 s, 2 idle (ranks 17,301)": the states by size, the largest with
    its median age, the small ones named."""
    if not rows:
        return "0 ranks"
    groups = _by_state(rows)
    parts = []
    for index, (state, members) in enumerate(groups.items()):
        if index == 0:   # the many: how long they have been so
            parts.append(f"{len(members)} {state} {age_text(now - _median([m.since for m in members]))}")
        else:            # the few: who they are
            parts.append(f"{len(members)} {state}{_named(members, len(rows))}")
    noun = "rank" if len(rows) == 1 else "ranks"
    return f"{len(rows)} {noun}: " + ", ".join(parts)


def stragglers(rows: Sequence[RankState], now: float) -> dict[int, str]:
    """{rank: why} for the ranks worth a look: still busy well after most ranks finished, or
    silent far longer than the others while all of them run."""
    alive = [row for row in rows if row.state in (IDLE, BUSY)]
    busy = [row for row in alive if row.state == BUSY]
    idle = [row for row in alive if row.state == IDLE]
    found: dict[int, str] = {}
    if busy and len(idle) > len(alive) / 2:
        finished = _median([row.since for row in idle])
        if now - finished >= LATE_AFTER_S:
            found.update({row.rank: f"still busy {age_text(now - finished)} after most finished"
                          for row in busy if row.since <= finished})
    talking = [row for row in busy if row.last_output is not None and row.last_output >= row.since]
    if len(busy) > len(alive) / 2 and len(talking) > len(busy) / 2:
        usual = _median([now - row.last_output for row in talking])
        limit = max(SILENT_AT_LEAST_S, SILENT_FACTOR * usual)
        for row in busy:
            heard = row.last_output if row.last_output is not None and row.last_output >= row.since \
                else row.since
            if now - heard > limit and row.rank not in found:
                found[row.rank] = f"silent {age_text(now - heard)} while the others print"
    return found


def by_host(rows: Sequence[RankState]) -> dict[str, list[RankState]]:
    """The rows grouped by host, hosts in order of their first rank."""
    hosts: dict[str, list[RankState]] = {}
    for row in rows:
        hosts.setdefault(row.host, []).append(row)
    return hosts
