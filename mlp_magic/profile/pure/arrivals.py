"""The straggler, named by arrival (pure): when each rank entered each collective, which rank came
last, how late, and how long the others waited for it.

Step times cannot name the straggler: a collective evens out every rank's step, since the early
ranks wait in it for the last one. The time each rank entered it (torch's flight recorder keeps
it, gloo's collectives too) does. Collectives are matched across ranks by their group and their
number in it; only those every profiled rank entered count.
"""
from __future__ import annotations

from collections import Counter
from math import comb
from statistics import median

from mlp_magic.core.ranges import fold_ranks, rank_words
from mlp_magic.core.records import Record

# A rank this much later than the others' median is late (below it: the ranks' clocks and the
# recorder's own jitter). The straggler is the rank late at this share of all the collectives, and
# more often than chance would make it: on a loaded host every collective may see some rank a few
# ms late, each rank as likely as the next, and one of 4 ranks is last at 3 of 6 half the time.
# One late start (the first collective after the cell began on each rank at its own moment) is none.
LATE_S = 0.005
STRAGGLER_SHARE = 0.5
CHANCE = 0.001   # the straggler is last so often that chance would do it at most this rarely


class Collective(Record, frozen=True):
    group: str
    seq: int
    op: str
    arrivals: tuple   # ((rank, seconds), ...) in rank order

    @property
    def last(self) -> tuple:
        """(the last rank to enter, how much later than the others' median)."""
        rank, at = max(self.arrivals, key=lambda pair: (pair[1], pair[0]))
        others = [t for r, t in self.arrivals if r != rank]
        return rank, (at - median(others)) if others else 0.0

    def waited(self, rank: int) -> float:
        """How long ``rank`` waited in it for the last one."""
        latest = max(t for _, t in self.arrivals)
        return latest - dict(self.arrivals)[rank]


def matched(entered: dict) -> list:
    """[Collective] that every rank of ``entered`` ({rank: [{"group", "seq", "op", "t"}]}, ``t``
    in seconds) entered, in order of group and number."""
    by_key: dict = {}
    for rank, entries in entered.items():
        for entry in entries:
            by_key.setdefault((entry["group"], entry["seq"]), {})[rank] = entry
    ranks = sorted(entered)
    found = []
    for (group, seq), seen in sorted(by_key.items(), key=lambda item: (_order(item[0][0]), item[0][1])):
        if len(seen) == len(ranks) and len(ranks) > 1:
            found.append(Collective(group, seq, seen[ranks[0]]["op"],
                                    tuple((rank, float(seen[rank]["t"])) for rank in ranks)))
    return found


def _order(group: str) -> tuple:
    return (0, int(group), "") if group.isdigit() else (1, 0, group)


class Verdict(Record, frozen=True):
    straggler: int | None   # None: no rank was late, or the late one changed
    lines: tuple


def straggler(collectives: list) -> Verdict:
    """The rank that held the others back, and the lines saying so."""
    if not collectives:
        return Verdict(None, ())
    late = [c for c in collectives if c.last[1] >= LATE_S]
    if not late:
        spread = median(c.last[1] for c in collectives)
        return Verdict(None, (f"no rank was late: at each of {len(collectives)} collectives the last rank "
                              f"entered {_seconds(spread)} after the others (median)",))
    lasts = Counter(c.last[0] for c in late)
    rank, times = lasts.most_common(1)[0]
    ranks, total = len(collectives[0].arrivals), len(collectives)
    chance = by_chance(times, total, ranks)
    if times >= STRAGGLER_SHARE * total and chance > CHANCE:
        return Verdict(None, (f"no straggler named: rank {rank} entered last at {times} of {total} "
                              f"collectives, which chance alone would do {chance:.1%} of the time with "
                              f"{ranks} ranks; more collectives would tell",))
    if times < STRAGGLER_SHARE * total:
        if len(lasts) == 1:
            return Verdict(None, (f"no straggler: rank {rank} entered late at only {times} of "
                                  f"{len(collectives)} collectives",))
        told = ", ".join(f"rank {r} at {n}" for r, n in sorted(lasts.items(), key=lambda item: -item[1])[:4])
        return Verdict(None, (f"no one straggler: the late rank changed ({told} of {len(collectives)} "
                              "collectives)",))
    held = [c for c in late if c.last[0] == rank]
    return Verdict(rank, (_last_line(rank, held, len(collectives)), _waiting_line(rank, held)))


def by_chance(times: int, collectives: int, ranks: int) -> float:
    """The chance that one given rank is last at ``times`` or more of ``collectives`` when each of
    ``ranks`` is as likely to be last (the binomial tail), times the ranks: any of them."""
    p = 1.0 / ranks
    tail = sum(comb(collectives, k) * p ** k * (1 - p) ** (collectives - k)
               for k in range(times, collectives + 1))
    return min(1.0, tail * ranks)


def _last_line(rank: int, held: list, total: int) -> str:
    ops = " and ".join(dict.fromkeys(c.op for c in held))
    numbers = ", ".join(f"#{fold_ranks(c.seq for c in held if c.group == g)}"
                        for g in dict.fromkeys(c.group for c in held))
    lateness = median(c.last[1] for c in held)
    return (f"rank {rank} entered last at {len(held)} of {total} collectives ({ops} {numbers}), "
            f"{_seconds(lateness)} late (median)")


def _waiting_line(rank: int, held: list) -> str:
    others = [r for r, _ in held[0].arrivals if r != rank]
    waits = [sum(c.waited(r) for c in held) for r in others]
    ops = " and ".join(dict.fromkeys(c.op for c in held))
    return (f"{rank_words(others)} ({len(others)}) waited {_seconds(median(waits))} each (median) "
            f"in {ops} for rank {rank}")


def waits_of(collectives: list) -> dict:
    """{rank: seconds waited in collectives for later ranks}."""
    waits: dict = {}
    for collective in collectives:
        for rank, _ in collective.arrivals:
            waits[rank] = waits.get(rank, 0.0) + collective.waited(rank)
    return waits


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
