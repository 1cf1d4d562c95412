"""One-line hints about a host's layout that cost performance silently. Pure.

Convention (as torchrun and the magics use it): local rank i drives GPU i.
"""
from __future__ import annotations

from typing import Any
from collections.abc import Iterable

from mlp_magic.core.ranges import fold_ranks
from mlp_magic.gpu.pure.model import HostGpus, link_distance


def numa_span_hint(gpus: HostGpus, ranks: Iterable[Any]) -> str | None:
    """A hint when the ranks on this host drive GPUs on more than one NUMA node.

    ``ranks``: objects with ``.rank`` and ``.local_rank`` (topology.Rank) placed on this host.
    """
    numa_of_gpu = {g.index: g.numa_node for g in gpus.gpus if g.numa_node is not None}
    by_node: dict[int, list[int]] = {}
    for rank in ranks:
        node = numa_of_gpu.get(rank.local_rank)
        if node is not None:
            by_node.setdefault(node, []).append(rank.rank)
    if len(by_node) < 2:
        return None
    placed = "; ".join("node %d: ranks %s" % (node, fold_ranks(by_node[node])) for node in sorted(by_node))
    return ("%s: ranks %s span NUMA nodes %s (%s); pin each rank to its GPU's CPUs "
            "(cpu_affinity) or memory and PCIe traffic cross the socket"
            % (gpus.host, fold_ranks(r for rs in by_node.values() for r in rs),
               ",".join(str(n) for n in sorted(by_node)), placed))


def nearest_nic(gpus: HostGpus, device: str) -> str | None:
    """The NIC with the closest link to ``device`` (first in NIC order on ties), or None."""
    known = [nic for nic in gpus.nics if gpus.link(device, nic) is not None]
    if not known:
        return None
    return min(known, key=lambda nic: link_distance(gpus.link(device, nic)))


def far_nic_hint(gpus: HostGpus) -> str | None:
    """A hint naming the GPUs whose nearest NIC is across the socket (SYS)."""
    far = [g.index for g in gpus.gpus
           if (nic := nearest_nic(gpus, g.device)) is not None and gpus.link(g.device, nic) == "SYS"]
    if not far:
        return None
    return ("%s: GPU %s reach their nearest NIC only across the socket (SYS); "
            "inter-node traffic from them crosses the CPU interconnect" % (gpus.host, fold_ranks(far)))


def host_hints(gpus: HostGpus, ranks: Iterable[Any] = ()) -> list[str]:
    """Every hint for one host, one line each."""
    hints = [numa_span_hint(gpus, ranks), far_nic_hint(gpus)]
    return [hint for hint in hints if hint]
