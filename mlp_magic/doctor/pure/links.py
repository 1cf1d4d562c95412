"""The link test's arithmetic and findings (pure): bandwidth as nccl-tests reports it, the pairs of
hosts to measure at once, and the hosts and pairs below a share of the median.

nccl-tests' convention: ``algbw = bytes / seconds`` (the message size over one operation's time)
and, for all_reduce, ``busbw = algbw * 2 (n - 1) / n``: what each rank's link carried, comparable
with the hardware's bandwidth whatever the number of ranks ``n``.
"""
from __future__ import annotations

import statistics

from mlp_magic.core.numbers import number
from mlp_magic.doctor.pure.report import ERROR, WARNING, Finding, Report, Shared

GB = 1e9   # nccl-tests reports GB/s of 10^9 bytes


def algbw(size_bytes: float, seconds: float) -> float:
    """Bytes per second of one operation on ``size_bytes``."""
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    return size_bytes / seconds


def busbw(algbw_value: float, ranks: int, operation: str = "all_reduce") -> float:
    """nccl-tests' bus bandwidth: all_reduce moves 2 (n-1)/n of the data over each rank's link;
    all_gather and reduce_scatter (n-1)/n; broadcast, reduce and send/recv all of it."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks!r}")
    factor = {"all_reduce": 2 * (ranks - 1) / ranks, "all_gather": (ranks - 1) / ranks,
              "reduce_scatter": (ranks - 1) / ranks}.get(operation, 1.0)
    return algbw_value * factor


def pair_rounds(count: int) -> list:
    """Every pair of ``count`` members once, in rounds of disjoint pairs (the circle method):
    ``count - 1`` rounds for an even count, ``count`` for an odd one; each round's pairs can be
    measured at once without sharing a member."""
    members = list(range(count)) + ([None] if count % 2 else [])
    rounds = []
    for _ in range(len(members) - 1):
        half = len(members) // 2
        pairs = [(min(a, b), max(a, b)) for a, b in zip(members[:half], reversed(members[half:]))
                 if a is not None and b is not None]
        rounds.append(pairs)
        members = [members[0], members[-1], *members[1:-1]]
    return rounds


def below(values: dict, fraction: float) -> dict:
    """{key: value} of those under ``fraction`` of the median of all (none when fewer than 3:
    with two, which one is slow cannot be told)."""
    if len(values) < 3:
        return {}
    median = statistics.median(values.values())
    return {key: value for key, value in values.items() if value < fraction * median}


def _count(value, low: int) -> bool:
    return isinstance(value, int) and number(value) is not None and value >= low


def _positive(value) -> bool:
    """A finite number above 0 (json also reads NaN, Infinity, strings where this goes)."""
    return number(value) is not None and value > 0   # 10**400 is an int past any float


def _measured_problem(result: dict):
    """What in a measured answer ``add_link_findings`` could not take, in words, or None."""
    pairs = result.get("pairs", [])
    wrong = [("backend", not isinstance(result.get("backend"), str)),
             ("ranks", not _count(result.get("ranks"), 1)), ("bytes", not _count(result.get("bytes"), 1)),
             # a nanosecond at least: a shorter one makes the bandwidth Infinity
             ("seconds", not (_positive(result.get("seconds")) and result["seconds"] >= 1e-9)),
             ("pairs", not isinstance(pairs, list) or not all(
                 isinstance(p, list) and len(p) == 3 and _count(p[0], 0) and _count(p[1], 0)
                 and _positive(p[2]) for p in pairs))]
    return next((f"{key} is {result.get(key)!r:.60}" for key, bad in wrong if bad), None)


def link_answer(answer: dict) -> dict:
    """The ranks' answer (rank 0's measurement, or a rank's {"error"}) checked before it is read:
    as it is, or {"error"} naming what in it is wrong. Its "hosts" are kept when they are names."""
    hosts = answer.get("hosts")
    kept = {"hosts": hosts} if isinstance(hosts, list) and all(isinstance(h, str) for h in hosts) else {}
    if "seconds" in answer:
        problem = _measured_problem(answer)
        if problem is None:
            return {**{k: v for k, v in answer.items() if k != "hosts"}, **kept}
        return {"error": f"the link test's answer is unreadable: {problem}", **kept}
    error = answer.get("error")
    lines = error.strip().splitlines() if isinstance(error, str) else []
    unreadable = f"the link test's answer is unreadable: error is {error!r:.60}"
    return {"error": lines[0][:300] if lines else unreadable, **kept}


def _gbps(value: float) -> str:
    return f"{value / GB:.2f} GB/s"


def add_link_findings(report: Report, result: dict, fraction: float) -> None:
    """The link test's answer ({"backend", "ranks", "bytes", "seconds", "pairs": [[a, b, bytes/s]]}
    or {"error"} or {"skipped"}) -> a shared line with the bandwidth, and findings for the slow pairs
    and hosts. Skipped (one rank: no link to test) is a warning: it says nothing bad of the host."""
    if result.get("skipped"):
        report.add(Finding(WARNING, "links", "links not tested", tuple(result.get("hosts") or ()),
                           result["skipped"], "run on 2 or more ranks (GPUs or hosts) to test the links"))
        return
    why = result.get("backend_why")   # why torch was passed over for MPI, where it was
    if result.get("error"):
        report.add(Finding(ERROR, "links", "collective test", tuple(result.get("hosts") or ()),
                           result["error"] + (f"; torch was passed over: {why}" if why else ""),
                           "run the doctor without --links to see what differs first"))
        return
    ranks, size = result["ranks"], result["bytes"]
    value = algbw(size, result["seconds"])
    report.links = {"backend": result["backend"], "ranks": ranks, "bytes": size, "seconds": result["seconds"],
                    "algbw_gbps": round(value / GB, 4), "busbw_gbps": round(busbw(value, ranks) / GB, 4),
                    "pairs": [{"hosts": [a, b], "gbps": round(bw / GB, 4)}
                              for a, b, bw in result.get("pairs", [])]}
    report.add(Shared("links", f"all_reduce {result['backend']}",
                      f"busbw {_gbps(busbw(value, ranks))}, algbw {_gbps(value)} ({ranks} ranks, "
                      f"{size / 1e6:g} MB)"))
    if why:
        report.links["backend_why"] = why
        report.add(Shared("links", "not torch", why))
    pairs = {(a, b): bw for a, b, bw in result.get("pairs", [])}
    if pairs:
        median = statistics.median(pairs.values())
        report.add(Shared("links", "host pairs send/recv", f"median {_gbps(median)} over {len(pairs)} pairs"))
    slow = below(pairs, fraction)
    for (a, b), bw in sorted(slow.items(), key=lambda item: item[1]):
        report.add(Finding(WARNING, "links", "slow pair", (a, b),
                           f"{a} <-> {b}: {_gbps(bw)}, under {fraction:g} of the median "
                           f"{_gbps(statistics.median(pairs.values()))}",
                           "check the NICs, cables and switch ports of these hosts (ibstat, ethtool)"))
    _slow_hosts(report, slow, pairs)


def _slow_hosts(report: Report, slow: dict, pairs: dict) -> None:
    """A host in every one of its pairs' slow list is the slow one, not its peers."""
    hosts = {h for pair in pairs for h in pair}
    for host in sorted(hosts):
        own = [pair for pair in pairs if host in pair]
        if len(own) >= 2 and all(pair in slow for pair in own):
            report.add(Finding(ERROR, "links", "slow host", (host,),
                               f"every pair with {host} is slow ({len(own)} pairs)",
                               "check this host's NIC and its link (ibstat; NCCL_DEBUG=INFO shows the "
                               "transport chosen)"))
