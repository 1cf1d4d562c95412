"""The ``mlp-magic`` command: what the cluster is made of, from a terminal.

    mlp-magic topo [--host H] [--from-file FILE] [--json]   GPU/NIC link matrix of a host
    mlp-magic status [--hostfile F | -H HOSTS] [--json]    hosts, slots, ranks, reachability, GPUs

Bad input exits with status 2 and one line on stderr.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from typing import Dict, List, Optional, Sequence

from .errors import MlpMagicError
from .gpu import HostGpus, format_topo_matrix, host_hints, parse_topo_matrix, probe_local
from .ranges import fold_ranks

PROG = "mlp-magic"


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage in one line (exit 2) instead of usage + error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise MlpMagicError("%s (see %s --help)" % (message, self.prog))


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="See the cluster: hosts, ranks and GPU topology.")
    commands = parser.add_subparsers(dest="command", metavar="{topo,status}", parser_class=_Parser)
    commands.required = True
    topo = commands.add_parser("topo", help="GPU/NIC link matrix (like nvidia-smi topo -m)")
    topo.add_argument("--host", help="host to show (this machine by default)")
    topo.add_argument("--from-file", metavar="FILE",
                      help="read a saved `nvidia-smi topo -m` text ('-': stdin)")
    topo.add_argument("--json", action="store_true", help='print {"<host>": {"gpus", "nics", "links"}}')
    topo.add_argument("--timeout", type=float, default=5.0, help="GPU probe timeout in seconds (5)")
    status = commands.add_parser("status", help="hosts, slots, ranks, reachability and GPUs")
    status.add_argument("--hostfile", help="an MPI hostfile (else the environment decides)")
    status.add_argument("-H", "--hosts", help="host list such as worker[0-3]:8")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.add_argument("--timeout", type=float, default=2.0, help="per-host probe timeout in seconds (2)")
    return parser


# ------------------------------------------------------------------------------------ topo

def _local_names() -> List[str]:
    name = socket.gethostname()
    return ["localhost", "127.0.0.1", "::1", name.lower(), name.split(".")[0].lower()]


def _read_saved(path: str, host: Optional[str]) -> HostGpus:
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8", errors="replace").read()
    except OSError as exc:
        raise MlpMagicError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
    name = host or ("stdin" if path == "-" else os.path.splitext(os.path.basename(path))[0])
    return parse_topo_matrix(text, host=name, source=path)


def _topo_inventory(args: argparse.Namespace) -> HostGpus:
    if args.from_file:
        return _read_saved(args.from_file, args.host)
    if args.host and args.host.lower() not in _local_names():
        raise MlpMagicError("topo --host %s: only this machine (%s) can be probed for now; run "
                            "`nvidia-smi topo -m` there and pass the saved text with --from-file"
                            % (args.host, socket.gethostname()))
    if args.timeout <= 0:
        raise MlpMagicError("topo --timeout must be positive, got %g" % args.timeout)
    return probe_local(timeout=args.timeout, host=args.host or socket.gethostname())


def host_json(gpus: HostGpus) -> Dict[str, object]:
    """One host's entry in the JSON output: the HostGpus fields except the host (the key)."""
    data = gpus.to_dict()
    del data["host"]
    return data


def _gpu_table(gpus: HostGpus) -> List[str]:
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
    return _columns(rows)


def _columns(rows: Sequence[Sequence[str]]) -> List[str]:
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]))]
    return ["".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def topo_text(gpus: HostGpus) -> str:
    """The human form: a title line, the matrix, the GPU table, the hints."""
    if not gpus.gpus:
        return "%s: no GPU (CPU-only host%s)\n" % (gpus.host, "; %s" % gpus.error if gpus.error else "")
    title = "%s (%s): %d GPU%s, %d NIC%s" % (
        gpus.host, gpus.source, len(gpus.gpus), "" if len(gpus.gpus) == 1 else "s",
        len(gpus.nics), "" if len(gpus.nics) == 1 else "s")
    lines = [title] + (["note: %s" % gpus.error] if gpus.error else [])
    lines += ["", format_topo_matrix(gpus).rstrip("\n")]
    table = _gpu_table(gpus)
    lines += [""] + table if table else []
    lines += ["hint: %s" % hint for hint in host_hints(gpus)]
    return "\n".join(lines) + "\n"


def run_topo(args: argparse.Namespace) -> int:
    gpus = _topo_inventory(args)
    if args.json:
        print(json.dumps({gpus.host: host_json(gpus)}, indent=2))
    else:
        sys.stdout.write(topo_text(gpus))
    return 0


# ---------------------------------------------------------------------------------- status

def _reachability(topology, timeout: float) -> Dict[str, object]:
    from .server.reachability import probe_hosts

    return asyncio.run(probe_hosts(topology.hosts, timeout))


def status_json(topology, reachability: Dict[str, object], local: Optional[HostGpus]) -> Dict[str, object]:
    """Hosts with their slots, the ranks a full job puts there, reachability and GPUs. Pure."""
    ranks = topology.layout(topology.total_slots) if topology.total_slots else []
    hosts = []
    for host in topology.hosts:
        probe = reachability.get(host.name)
        is_local = local is not None and (topology.is_local or host.name.lower() in _local_names())
        hosts.append({
            "name": host.name,
            "slots": host.slots,
            "ranks": [r.rank for r in ranks if r.host == host.name],
            "reachable": getattr(probe, "reachable", None),
            "error": getattr(probe, "error", None),
            "gpus": host_json(local) if is_local else None,
            "hints": host_hints(local, [r for r in ranks if r.host == host.name]) if is_local else [],
        })
    return {"source": topology.source, "master_addr": topology.master_addr, "is_local": topology.is_local,
            "total_slots": topology.total_slots, "hosts": hosts}


def status_text(status: Dict[str, object]) -> str:
    lines = ["topology: %s, %d host%s, %d slots, master %s" % (
        status["source"], len(status["hosts"]), "" if len(status["hosts"]) == 1 else "s",
        status["total_slots"], status["master_addr"])]
    rows = [["HOST", "SLOTS", "RANKS", "REACHABLE", "GPUS"]]
    hints: List[str] = []
    for host in status["hosts"]:
        reachable = {True: "yes", False: "no", None: "?"}[host["reachable"]]
        if host["error"]:
            reachable += " (%s)" % host["error"]
        rows.append([host["name"], str(host["slots"]), fold_ranks(host["ranks"]) or "-", reachable,
                     _gpus_summary(host["gpus"])])
        hints += host["hints"]
    return "\n".join(lines + _columns(rows) + ["hint: %s" % h for h in hints]) + "\n"


def _gpus_summary(gpus: Optional[Dict[str, object]]) -> str:
    if gpus is None:
        return "not probed (remote hosts: later)"
    if not gpus["gpus"]:
        return "none" + (" (%s)" % gpus["error"] if gpus["error"] else "")
    names = sorted({g["name"] or "GPU" for g in gpus["gpus"]})
    return "%d x %s (%s)" % (len(gpus["gpus"]), ", ".join(names), gpus["source"])


def run_status(args: argparse.Namespace) -> int:
    from .topology import topology_from_environment

    if args.timeout <= 0:
        raise MlpMagicError("status --timeout must be positive, got %g" % args.timeout)
    topology = topology_from_environment(hostfile=args.hostfile, hosts=args.hosts)
    local_here = topology.is_local or any(h.name.lower() in _local_names() for h in topology.hosts)
    local = probe_local(timeout=args.timeout) if local_here else None
    status = status_json(topology, _reachability(topology, args.timeout), local)
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        sys.stdout.write(status_text(status))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        args = _parser().parse_args(argv)
        return run_topo(args) if args.command == "topo" else run_status(args)
    except MlpMagicError as exc:
        print("%s: %s" % (PROG, exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `mlp-magic topo --json | head`: the reader left, nothing to say
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
