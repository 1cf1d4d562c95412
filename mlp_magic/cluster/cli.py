"""``mlp-magic topo`` and ``mlp-magic status``: what the cluster is made of, from a terminal.

Other hosts are asked over ssh (``--ssh``, default ``$MLP_MAGIC_SSH`` or ``ssh``): each runs
``mlp-magic topo --json`` itself. The command's parser and exit statuses are ``mlp_magic.cli``'s.
"""
from __future__ import annotations

import json
import os
import socket
import sys

from mlp_magic.machine.names import is_this_machine
from mlp_magic.machine.user_files import read_text
from mlp_magic.gpu.pure.smi_topo import MAX_TOPO_BYTES
from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu import HostGpus, parse_topo_matrix, probe_local
from mlp_magic.cluster.collect import CollectOptions, StateCollector
from mlp_magic.cluster.pure.model import gpus_json
from mlp_magic.cluster.text import status_text, topo_text


class HostProbeFailed(Exception):
    """``topo --host H``: H could not be probed (unreachable, timed out, no mlp_magic there)."""


# ------------------------------------------------------------------------------------ topo

def _read_saved(path: str, host: str | None) -> HostGpus:
    if path == "-":
        text = sys.stdin.read(MAX_TOPO_BYTES + 1)
        if len(text) > MAX_TOPO_BYTES:
            raise MlpMagicError("--from-file -: stdin holds more than 1 MiB: not a saved topology")
    else:
        text = read_text(path, "--from-file", MAX_TOPO_BYTES)
    name = host or ("stdin" if path == "-" else os.path.splitext(os.path.basename(path))[0])
    return parse_topo_matrix(text, host=name, source=path)


def _topo_inventory(args) -> HostGpus:
    if args.from_file:
        return _read_saved(args.from_file, args.host)
    if args.timeout <= 0:
        raise MlpMagicError("topo --timeout must be positive, got %g" % args.timeout)
    if args.host and not is_this_machine(args.host):
        return _remote_inventory(args.host, args.ssh, args.timeout)
    return probe_local(timeout=args.timeout, host=args.host or socket.gethostname())


def _remote_inventory(host: str, ssh: str | None, timeout: float) -> HostGpus:
    """Another host's GPUs: it runs ``mlp-magic topo --json`` itself, over ssh."""
    from mlp_magic.gpu.collect import collect_over_ssh

    [gpus] = collect_over_ssh([host], ssh=ssh, timeout=timeout, connect_timeout=timeout).values()
    if gpus.source == "none" and gpus.error:  # nothing came back from the host's own probe
        raise HostProbeFailed("topo --host %s: %s" % (host, gpus.error))
    return gpus


def run_topo(args) -> int:
    gpus = _topo_inventory(args)
    if args.json:
        print(json.dumps({gpus.host: gpus_json(gpus)}, indent=2))
    else:
        sys.stdout.write(topo_text(gpus))
    return 0


# ---------------------------------------------------------------------------------- status

def run_status(args) -> int:
    """The cluster's one model: its JSON with ``--json``, else its status text."""
    if args.timeout <= 0:
        raise MlpMagicError("status --timeout must be positive, got %g" % args.timeout)
    options = CollectOptions(hostfile=args.hostfile, hosts=args.hosts, gpus="all" if args.probe else "none",
                             timeout=args.timeout, reach_timeout=args.timeout, ssh=args.ssh)
    state = StateCollector(options)()
    if state.error:   # the hosts could not be read: bad input
        raise MlpMagicError(state.error)
    if args.json:
        print(json.dumps(state.to_json(), indent=2))
    else:
        sys.stdout.write(status_text(state))
    return 0
