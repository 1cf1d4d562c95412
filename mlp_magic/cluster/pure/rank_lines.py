"""The ranks' live states as the ``%mlp_cluster`` widget shows them: one line per host, and what
changed between two readings. Pure: rows in, text and HTML out.

A reading is a tuple of ``(rank, host, state)`` rows (``world/pure/rank_states``' states), in rank
order. ``by_host`` groups it; ``changed_hosts`` names the hosts whose line must be sent again, so a
tick where one rank of 512 changed sends one host's line, and a tick where none did sends nothing.
A line folds each state's ranks into ranges (``0-63``), so its size follows the number of runs of
one state, never the number of ranks.
"""
from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence

from mlp_magic.core.ranges import fold_ranks

RankRow = tuple[int, str, str]                      # rank, host, state
HostRanks = tuple[tuple[int, str], ...]             # one host's (rank, state), in rank order

ORDER = ("busy", "paused", "starting", "idle", "dead")   # what needs a look first
COLOURS = {"busy": "#ef6c00", "paused": "#1565c0", "starting": "#757575", "idle": "#2e7d32",
           "dead": "#c62828"}
STOPPED = "dead"


def by_host(rows: Iterable[RankRow]) -> dict[str, HostRanks]:
    """{host: its (rank, state) pairs}, hosts in the order their first rank comes."""
    grouped: dict[str, list[tuple[int, str]]] = {}
    for rank, host, state in rows:
        grouped.setdefault(host, []).append((rank, state))
    return {host: tuple(pairs) for host, pairs in grouped.items()}


def changed_hosts(old: Mapping[str, HostRanks], new: Mapping[str, HostRanks]) -> list[str]:
    """The hosts of ``new`` whose ranks or states differ from ``old`` (a new host included)."""
    return [host for host, ranks in new.items() if old.get(host) != ranks]


def all_stopped(rows: Iterable[RankRow]) -> tuple[RankRow, ...]:
    """The same ranks, every one dead: what a stopped World shows."""
    return tuple((rank, host, STOPPED) for rank, host, _ in rows)


def states_of(ranks: HostRanks) -> list[tuple[str, list[int]]]:
    """[(state, its ranks)], the states in ``ORDER`` (unknown ones last), empty ones left out."""
    found: dict[str, list[int]] = {}
    for rank, state in ranks:
        found.setdefault(state, []).append(rank)
    known = [s for s in ORDER if s in found] + sorted(s for s in found if s not in ORDER)
    return [(state, found[state]) for state in known]


def host_line(host: str, ranks: HostRanks) -> str:
    """ "worker0: 2 busy 0-1, 6 idle 2-7" """
    parts = ["%d %s %s" % (len(r), state, fold_ranks(r)) for state, r in states_of(ranks)]
    return "%s: %s" % (host, ", ".join(parts) if parts else "no ranks")


def host_line_html(host: str, ranks: HostRanks) -> str:
    """``host_line`` with each state in its colour (inline styles, text escaped)."""
    parts = ['<span style="color:%s"><b>%d %s</b> %s</span>' % (
        COLOURS.get(state, "#000000"), len(r), html.escape(state), html.escape(fold_ranks(r)))
        for state, r in states_of(ranks)]
    return '<div class="mlp-rank-line" style="font-family:monospace"><b>%s</b>: %s</div>' % (
        html.escape(host), ", ".join(parts) if parts else "no ranks")


def ranks_text(rows: Sequence[RankRow]) -> list[str]:
    """The text face: a heading and one line per host, or nothing when there is no World."""
    if not rows:
        return []
    return ["ranks (live):"] + ["  " + host_line(host, ranks) for host, ranks in by_host(rows).items()]


def chunked(hosts: Sequence[str], chunks: int) -> list[list[str]]:
    """``hosts`` in at most ``chunks`` consecutive groups of near equal size, in order."""
    if not hosts:
        return []
    count = min(chunks, len(hosts))
    return [list(hosts[i * len(hosts) // count:(i + 1) * len(hosts) // count]) for i in range(count)]
