"""Plain-text faces of the cluster: the widget's repr (``state_text``), ``mlp-magic status``
(``status_text``) and ``mlp-magic topo`` (``topo_text``). Pure: values in, text out.
"""
from __future__ import annotations

from datetime import datetime
from collections.abc import Sequence

from mlp_magic.core.ranges import fold_ranks
from mlp_magic.gpu import HostGpus, format_topo_matrix, host_hints, nearest_nic
from mlp_magic.cluster.pure.model import ClusterState, HostView
from mlp_magic.cluster.pure.rank_lines import RankRow, ranks_text


def when(updated_at: str) -> str:
    """An ISO 8601 time as this machine's clock reads it (HH:MM:SS); anything else as it is."""
    try:
        moment = datetime.fromisoformat(updated_at)
    except (TypeError, ValueError):
        return updated_at
    return (moment.astimezone() if moment.tzinfo else moment).strftime("%H:%M:%S")


def reachable_text(host: HostView) -> str:
    text = {True: "yes", False: "no", None: "?"}[host.reachable]
    return text + (" (%s)" % host.reach_error if host.reach_error else "")


def gpus_summary(gpus: HostGpus | None, with_source: bool = False) -> str:
    """ "8 x NVIDIA H200" (with its source: "(nvml)"), "none (why)" or "not probed"."""
    if gpus is None:
        return "not probed"
    if not gpus.gpus:
        return "none" + (" (%s)" % gpus.error if gpus.error else "")
    names = sorted({g.name or "GPU" for g in gpus.gpus})
    source = " (%s)" % gpus.source if with_source else ""
    return "%d x %s%s" % (len(gpus.gpus), ", ".join(names), source)


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as aligned columns, two spaces apart."""
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]))]
    return ["".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def host_rows(state: ClusterState) -> list[list[str]]:
    """The host table, header first: host, slots, ranks, reachable, engines, GPUs."""
    rows = [["host", "slots", "ranks", "reachable", "engines", "GPUs"]]
    for host in state.hosts:
        rows.append([host.name, str(host.slots), fold_ranks(host.ranks) or "-", reachable_text(host),
                     host.engine_summary, gpus_summary(host.gpus)])
    return rows


def title(state: ClusterState) -> str:
    return "%s: %d host%s, %d slots, master %s%s" % (
        state.source, len(state.hosts), "" if len(state.hosts) == 1 else "s", state.total_slots,
        state.master_addr, ", updated %s" % when(state.updated_at) if state.updated_at else "")


def gpu_lines(gpus: HostGpus) -> list[str]:
    """One line per GPU: name, memory, utilisation, NUMA node, nearest NIC."""
    lines = []
    for g in gpus.gpus:
        memory = ("%.1f / %.1f GiB" % (g.memory_used_mib / 1024, g.memory_total_mib / 1024)
                  if g.memory_used_mib is not None and g.memory_total_mib else "memory n/a")
        util = "%d%%" % g.utilization_pct if g.utilization_pct is not None else "util n/a"
        nic = nearest_nic(gpus, g.device)
        near = "%s (%s)" % (nic, gpus.link(g.device, nic)) if nic else "no NIC"
        lines.append("%s%s: %s, %s, NUMA %s, CPUs %s, nearest NIC %s" % (
            g.device, " " + g.name if g.name else "", memory, util,
            "n/a" if g.numa_node is None else g.numa_node,
            g.cpu_affinity or "n/a", near))
    return lines


def state_text(state: ClusterState) -> str:
    """The widget's text: title, host table, then per host its matrix, GPUs and hints."""
    if state.error:
        return "cluster: %s\n" % state.error
    lines = [title(state)] + columns(host_rows(state))
    for host in state.hosts:
        if host.gpus is None or not host.gpus.gpus:
            continue
        matrix = format_topo_matrix(host.gpus).split("\n\nLegend:")[0]
        lines += ["", "== %s ==" % host.name, matrix] + gpu_lines(host.gpus)
    lines += ["hint: %s" % h for host in state.hosts for h in host.hints]
    return "\n".join(lines) + "\n"


def view_text(state: ClusterState, rows: Sequence[RankRow] = (), dashboard: str | None = None) -> str:
    """The widget's text face: ``state_text``, the ranks' live states by host, then ``dashboard``
    (where the dashboard is, or how to start one) as the last line."""
    lines = [state_text(state).rstrip("\n")]
    lines += [""] + ranks_text(rows) if rows else []
    lines += ["", dashboard] if dashboard else []
    return "\n".join(lines) + "\n"


def status_text(state: ClusterState) -> str:
    """``mlp-magic status``: the topology's line, one row per host, the hints."""
    lines = ["topology: %s, %d host%s, %d slots, master %s" % (
        state.source, len(state.hosts), "" if len(state.hosts) == 1 else "s", state.total_slots,
        state.master_addr)]
    rows = [["HOST", "SLOTS", "RANKS", "REACHABLE", "GPUS"]]
    for host in state.hosts:
        rows.append([host.name, str(host.slots), fold_ranks(host.ranks) or "-", reachable_text(host),
                     gpus_summary(host.gpus, with_source=True)])
    hints = ["hint: %s" % h for host in state.hosts for h in host.hints]
    return "\n".join(lines + columns(rows) + hints) + "\n"


def _gpu_table(gpus: HostGpus) -> list[str]:
    """Name, bus id, memory, utilisation per GPU, when the source knew them."""
    if not any(g.name or g.memory_total_mib is not None for g in gpus.gpus):
        return []

    def shown(value: object, unit: str = "") -> str:
        return "-" if value is None else "%s%s" % (value, unit)

    rows = [["GPU", "NAME", "BUS ID", "MEMORY USED/TOTAL", "UTIL", "NUMA", "CPUS"]]
    for g in gpus.gpus:
        memory = "%s / %s MiB" % (shown(g.memory_used_mib), shown(g.memory_total_mib))
        rows.append([str(g.index), shown(g.name), shown(g.pci_bus_id), memory,
                     shown(g.utilization_pct, "%"), shown(g.numa_node), shown(g.cpu_affinity)])
    return columns(rows)


def topo_text(gpus: HostGpus) -> str:
    """The human form: a title line, the matrix, the GPU table, the hints."""
    if not gpus.gpus:
        return "%s: no GPU (CPU-only host%s)\n" % (gpus.host, "; %s" % gpus.error if gpus.error else "")
    heading = "%s (%s): %d GPU%s, %d NIC%s" % (
        gpus.host, gpus.source, len(gpus.gpus), "" if len(gpus.gpus) == 1 else "s",
        len(gpus.nics), "" if len(gpus.nics) == 1 else "s")
    lines = [heading] + (["note: %s" % gpus.error] if gpus.error else [])
    lines += ["", format_topo_matrix(gpus).rstrip("\n")]
    table = _gpu_table(gpus)
    lines += [""] + table if table else []
    lines += ["hint: %s" % hint for hint in host_hints(gpus)]
    return "\n".join(lines) + "\n"
