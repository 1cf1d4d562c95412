"""What a starting World says while its engines register, and when the start fails (pure).

Engines register under their rank's number (``engine.main``), so the registered ids are ranks
and the layout tells their hosts: progress reads per host, and a failure names the missing
ranks, their hosts and their own last log lines (each engine tags its lines ``[rank N]``).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from mlp_magic.core.ranges import fold_hosts, fold_ranks

MAX_HOST_GROUPS = 3       # incomplete host groups shown in the progress line
LOG_LINES_PER_RANK = 4
RANKS_QUOTED = 3          # missing ranks whose log lines a failure quotes


def host_counts(hosts_by_rank: Sequence[str], registered: Iterable[int]) -> dict:
    """host -> (registered ranks, ranks), hosts in rank order."""
    counts: dict = {}
    done = set(registered)
    for rank, host in enumerate(hosts_by_rank):
        have, total = counts.get(host, (0, 0))
        counts[host] = (have + (rank in done), total + 1)
    return counts


def progress_line(hosts_by_rank: Sequence[str], registered: Iterable[int], elapsed: float) -> str:
    """``starting 128 ranks: 97 registered (worker[0-11] complete, worker[12-15] 1/8) 23 s``."""
    counts = host_counts(hosts_by_rank, registered)
    have = sum(h for h, _ in counts.values())
    np = len(hosts_by_rank)
    head = f"starting {np} ranks: {have} registered"
    return f"{head} ({_per_host(counts)}) {elapsed:.0f} s" if counts else f"{head} {elapsed:.0f} s"


def _per_host(counts: dict) -> str:
    complete = [host for host, (have, total) in counts.items() if have == total]
    partial: dict = {}
    for host, (have, total) in counts.items():
        if have != total:
            partial.setdefault((have, total), []).append(host)
    parts = [f"{fold_hosts(complete)} complete"] if complete else []
    groups = sorted(partial.items(), key=lambda item: -item[0][0] / item[0][1])
    parts += [f"{fold_hosts(hosts)} {have}/{total}" for (have, total), hosts in groups[:MAX_HOST_GROUPS]]
    hidden = sum(len(hosts) for _, hosts in groups[MAX_HOST_GROUPS:])
    if hidden:
        parts.append(f"{hidden} more hosts partly registered")
    return ", ".join(parts)


def rank_log_lines(log_text: str, rank: int, limit: int = LOG_LINES_PER_RANK) -> list:
    """The last ``limit`` lines rank ``rank``'s engine logged (tagged ``[rank N]``)."""
    tag = re.compile(rf"\[rank {rank}\]")
    return [line.strip() for line in log_text.splitlines() if tag.search(line)][-limit:]


def untagged_tail(log_text: str, limit: int = LOG_LINES_PER_RANK) -> list:
    """The launcher's own last lines (and a rank's output from before its logging started)."""
    lines = [line.strip() for line in log_text.splitlines()
             if line.strip() and not re.search(r"\[rank \d+\]", line)]
    return lines[-limit:]


def missing_report(hosts_by_rank: Sequence[str], registered: Iterable[int], why: str,
                   log_text: str, advice: Sequence[str]) -> str:
    """One error: who is missing and where, what they last said, what to try."""
    done = set(registered)
    missing = [rank for rank in range(len(hosts_by_rank)) if rank not in done]
    hosts = fold_hosts(dict.fromkeys(hosts_by_rank[rank] for rank in missing))
    lines = [f"{len(done)} of {len(hosts_by_rank)} ranks registered ({why}); "
             f"missing: ranks {fold_ranks(missing)} on {hosts}"]
    for rank in missing[:RANKS_QUOTED]:
        said = rank_log_lines(log_text, rank)
        said_text = "; ".join(said) if said else "logged nothing"
        lines.append(f"  rank {rank} ({hosts_by_rank[rank]}): {said_text}")
    tail = untagged_tail(log_text)
    if tail:
        lines.append("  launcher: " + " | ".join(tail))
    lines += [f"  try: {item}" for item in advice]
    return "\n".join(lines)
