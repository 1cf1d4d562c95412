"""Did the launcher put the ranks where the layout says? Pure: the layout and what ranks reported."""
from __future__ import annotations

from mlp_magic.errors import MlpMagicError


def check_placement(layout: list, identities: dict) -> None:
    """The launcher must have put the ranks where our layout says (LOCAL_RANK, NODE_RANK and the
    GPU each rank picks depend on it): same local rank, and one machine per layout host."""
    machines = {}
    for row in layout:
        reported = identities[row.rank]
        local = reported.get("launcher_local_rank")
        if local is not None and local != row.local_rank:
            raise MlpMagicError(
                f"mpiexec placed rank {row.rank} as local rank {local} on {reported['host']}, but the "
                f"layout expects local rank {row.local_rank} on {row.host}; check the hostfile order "
                "and that no other mapping option (--map-by, a scheduler allocation) is in effect")
        machines.setdefault(row.host, set()).add(reported["host"])
    split = {host: names for host, names in machines.items() if len(names) > 1}
    if split:
        host, names = next(iter(split.items()))
        machines_text = ", ".join(sorted(names))
        raise MlpMagicError(f"the ranks meant for {host} ran on several machines ({machines_text})")


def first_rank_per_host(layout) -> dict:
    """{host: rank} of each host's first rank (its LOCAL_RANK 0, else its lowest), hosts in layout
    order: the rank that speaks for its host (%allrun through a World, GPU probes, the agent)."""
    chosen: dict = {}
    for row in layout:
        best = chosen.get(row.host)
        if best is None or (row.local_rank, row.rank) < (best.local_rank, best.rank):
            chosen[row.host] = row
    return {host: row.rank for host, row in chosen.items()}
