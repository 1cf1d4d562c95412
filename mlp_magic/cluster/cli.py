"""The ``mlp-magic`` command: what the cluster is made of, from a terminal.

    mlp-magic topo [--host H] [--from-file FILE] [--json]   GPU/NIC link matrix of a host
    mlp-magic status [--hostfile F | -H HOSTS] [--json]    hosts, slots, ranks, reachability, GPUs

Other hosts are asked over ssh (``--ssh``, default ``$MLP_MAGIC_SSH`` or ``ssh``): each runs
``mlp-magic topo --json`` itself. Bad input exits with status 2 and one line on stderr; a host
that ``topo --host`` cannot probe, with status 1.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import threading
from typing import Dict, List, Mapping, Optional, Sequence

from .errors import MlpMagicError
from .gpu import HostGpus, format_topo_matrix, host_hints, parse_topo_matrix, probe_local
from .ranges import fold_ranks

PROG = "mlp-magic"


class HostProbeFailed(Exception):
    """``topo --host H``: H could not be probed (unreachable, timed out, no mlp_magic there)."""


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
    topo.add_argument("--ssh", help="ssh client for another --host (default $MLP_MAGIC_SSH or ssh)")
    status = commands.add_parser("status", help="hosts, slots, ranks, reachability and GPUs")
    status.add_argument("--hostfile", help="an MPI hostfile (else the environment decides)")
    status.add_argument("-H", "--hosts", help="host list such as worker[0-3]:8")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.add_argument("--timeout", type=float, default=2.0,
                        help="probe timeout in seconds, one deadline for all hosts (2)")
    status.add_argument("--ssh", help="ssh client for the GPU probes (default $MLP_MAGIC_SSH or ssh)")
    status.add_argument("--no-probe", dest="probe", action="store_false", help="do not probe GPUs")
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
    if args.timeout <= 0:
        raise MlpMagicError("topo --timeout must be positive, got %g" % args.timeout)
    if args.host and args.host.lower() not in _local_names():
        return _remote_inventory(args.host, args.ssh, args.timeout)
    return probe_local(timeout=args.timeout, host=args.host or socket.gethostname())


def _remote_inventory(host: str, ssh: Optional[str], timeout: float) -> HostGpus:
    """Another host's GPUs: it runs ``mlp-magic topo --json`` itself, over ssh."""
    from .gpu.collect import collect_over_ssh

    [gpus] = collect_over_ssh([host], ssh=ssh, timeout=timeout, connect_timeout=timeout,
                              local_names=_local_names()).values()
    if gpus.source == "none" and gpus.error:  # nothing came back from the host's own probe
        raise HostProbeFailed("topo --host %s: %s" % (host, gpus.error))
    return gpus


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

def _start_reachability(topology, timeout: float):
    """Port probes of every host in a thread, started now; the returned function gives them
    ({} when they failed or took longer than ``timeout`` and a second)."""
    from .server.reachability import probe_hosts

    found: Dict[str, object] = {}

    def work() -> None:
        try:
            found.update(asyncio.run(probe_hosts(topology.hosts, timeout)))
        except Exception:  # shown as "?": the GPU probes still say what they know
            pass

    worker = threading.Thread(target=work, name="mlp-magic-reachability", daemon=True)
    worker.start()

    def result() -> Dict[str, object]:
        worker.join(timeout + 1.0)
        return dict(found)

    return result


def status_json(topology, reachability: Mapping[str, object],
                inventories: Mapping[str, HostGpus]) -> Dict[str, object]:
    """Hosts with their slots, the ranks a full job puts there, reachability and GPUs. Pure.

    ``inventories``: host name -> HostGpus (a host missing there shows as not probed).
    """
    ranks = topology.layout(topology.total_slots) if topology.total_slots else []
    hosts = []
    for host in topology.hosts:
        probe = reachability.get(host.name)
        gpus = inventories.get(host.name)
        placed = [r for r in ranks if r.host == host.name]
        hosts.append({
            "name": host.name,
            "slots": host.slots,
            "ranks": [r.rank for r in placed],
            "reachable": getattr(probe, "reachable", None),
            "error": getattr(probe, "error", None),
            "gpus": host_json(gpus) if gpus is not None else None,
            "hints": host_hints(gpus, placed) if gpus is not None else [],
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
        return "not probed"
    if not gpus["gpus"]:
        return "none" + (" (%s)" % gpus["error"] if gpus["error"] else "")
    names = sorted({g["name"] or "GPU" for g in gpus["gpus"]})
    return "%d x %s (%s)" % (len(gpus["gpus"]), ", ".join(names), gpus["source"])


def run_status(args: argparse.Namespace) -> int:
    from .topology import topology_from_environment

    if args.timeout <= 0:
        raise MlpMagicError("status --timeout must be positive, got %g" % args.timeout)
    topology = topology_from_environment(hostfile=args.hostfile, hosts=args.hosts)
    reachability = _start_reachability(topology, args.timeout)
    inventories: Dict[str, HostGpus] = {}
    if args.probe:
        from .gpu.collect import collect_over_ssh

        local_names = _local_names() + ([h.name for h in topology.hosts] if topology.is_local else [])
        inventories = collect_over_ssh(topology.hosts, ssh=args.ssh, timeout=args.timeout,
                                       connect_timeout=args.timeout, local_names=local_names)
    status = status_json(topology, reachability(), inventories)
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
    except HostProbeFailed as exc:
        print("%s: %s" % (PROG, exc), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `mlp-magic topo --json | head`: the reader left, nothing to say
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
