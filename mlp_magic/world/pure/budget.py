"""How long a World may take to start or to answer an interrupt, and whether this machine can
hold it (pure).

Starting is CPU-bound on the busiest host (each rank imports ipyparallel and ipykernel and builds
a shell), so the deadlines grow with the busiest host's ranks (hosts start in parallel), plus a
little per rank for the one controller that registers them all:
- ``stall_s``: no new engine registered for this long means the start is stuck (counted from
  the first registration: before it come the launcher's fan-out and every rank's imports);
- ``total_s``: the whole start (registration, identification, set-up), however steady.
ipyparallel's own patience is set to ``total_s``: the kernel decides, with one deadline it can
explain, instead of a controller quietly dropping a starved engine.

An interrupt's grace (how long to wait while ranks keep stopping after a SIGINT) grows with the
ranks each core of the busiest host serves: every interrupted rank builds IPython's traceback,
and many ranks on few cores answer late but together.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from mlp_magic.core.records import Record

STALL_BASE_S = 30.0
STALL_PER_BUSIEST_RANK_S = 1.0
TOTAL_BASE_S = 60.0
TOTAL_PER_BUSIEST_RANK_S = 2.0
TOTAL_PER_RANK_S = 0.05          # the controller registers every rank, whatever its host
# One rank right after start, in proportional set size, with some room (benchmarks/engine_weight.py
# measures it); user code adds to it.
RANK_MEMORY_BYTES = 60 * 2**20
MEMORY_HEADROOM = 0.8            # leave a fifth of what is available to the user's own code
INTERRUPT_GRACE_S = 1.0
SECOND_ROUND_S = 0.3            # the interrupt's second round where the first stopped no rank
GRACE_PER_RANK_PER_CORE_S = 0.1


class StartBudget(Record, frozen=True):
    stall_s: float
    total_s: float


def start_budget(ranks_per_host: Sequence[int]) -> StartBudget:
    busiest = max(ranks_per_host, default=0)
    total_ranks = sum(ranks_per_host)
    return StartBudget(
        stall_s=STALL_BASE_S + STALL_PER_BUSIEST_RANK_S * busiest,
        total_s=TOTAL_BASE_S + TOTAL_PER_BUSIEST_RANK_S * busiest + TOTAL_PER_RANK_S * total_ranks,
    )


def memory_shortfall(ranks_here: int, available_bytes: int,
                     per_rank_bytes: int = RANK_MEMORY_BYTES) -> str | None:
    """A sentence when ``ranks_here`` ranks would not fit in this machine's available memory."""
    needed = ranks_here * per_rank_bytes
    usable = int(available_bytes * MEMORY_HEADROOM)
    if ranks_here <= 0 or needed <= usable:
        return None
    fits = max(usable // per_rank_bytes, 0)
    return (f"{ranks_here} ranks on this machine need about {_gib(needed)} "
            f"({per_rank_bytes // 2**20} MiB each before any user code), but only "
            f"{_gib(available_bytes)} is available; at most {fits} ranks fit here "
            "(-np, or more hosts with --hostfile / -H)")


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"


def busiest_ranks_per_cpu(ranks: Iterable[tuple[str, Iterable[int]]]) -> float:
    """From each rank's (host, the CPUs it may run on): the busiest host's ranks per CPU, a
    host's CPUs being those of all its ranks together (ranks bound to a core each still share
    the host's cores); a host that named none counts one."""
    count: dict = {}
    cpus: dict = {}
    for host, allowed in ranks:
        count[host] = count.get(host, 0) + 1
        cpus.setdefault(host, set()).update(allowed)
    return max((n / max(len(cpus[host]), 1) for host, n in count.items()), default=0.0)


def interrupt_grace(ranks_per_cpu: float) -> float:
    """Seconds to keep waiting after the last rank stopped, before the others count as stuck."""
    return INTERRUPT_GRACE_S + GRACE_PER_RANK_PER_CORE_S * max(ranks_per_cpu, 0.0)


def second_round_grace(grace: float, running_before: int, running_after: int,
                       ranks_per_cpu: float = 1.0) -> float:
    """The wait after the interrupt's second round: all of ``grace`` where the first round
    stopped some ranks (a slow host: the others are on their way) or where ranks share cores
    (no rank stopping within a grace there is slowness, not C: 64 ranks on 8 hosts of 2 cores),
    ``SECOND_ROUND_S`` where it stopped none on cores of their own (stuck in C, or a rank that
    caught the interrupt and goes on: the second round is for it), so that the stop button
    returns within about a second and a half."""
    if running_after < running_before or ranks_per_cpu > 1:
        return grace
    return min(grace, SECOND_ROUND_S)
