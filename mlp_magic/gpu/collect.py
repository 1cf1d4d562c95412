"""GPU inventories of many hosts at once: through a World's engines (each host's first rank runs
``gpu/probe.probe_on_engine``; the kernel's side is gpu/engines, one RankJob), or over ssh.

ssh (``collect_over_ssh``), for hosts no World covers: the fan-out (fanout/hosts) runs
``<python> -m mlp_magic.cli topo --json`` on every host at once (the same image on every host),
this machine is probed in-process meanwhile, and one deadline bounds the whole call.
"""
from __future__ import annotations

import json
import shlex
import sys
import time
from typing import Any
from collections.abc import Iterable, Mapping

from mlp_magic.core.results import HostResult, why_no_answer
from mlp_magic.errors import MlpMagicError
from mlp_magic.fanout.hosts import start
from mlp_magic.fanout.transports import InThisProcess, Refused, Shell
from mlp_magic.fanout.underway import Underway
from mlp_magic.gpu.pure.model import HostGpus, failed, parse_topo_answer
from mlp_magic.gpu.probe import topo_argv


# --------------------------------------------------------------------------------- over ssh

# Each host's own probe gets this share of the timeout, so a slow driver comes back as that
# host's error message (over the ssh connection) before the collector stops waiting.
PROBE_SHARE = 0.5
MAX_ANSWER_BYTES = 1 << 20   # one host's topology JSON is a few kB; more is not an answer


def topo_command(python: str, probe_timeout: float) -> str:
    """The shell command each host runs: this package's ``topo --json`` under ``python``."""
    return "exec " + shlex.join(topo_argv(python, probe_timeout))


def inventory_from_result(result: HostResult, timeout: float, host: str | None = None) -> HostGpus:
    """One host's answer (fanout/hosts) -> its HostGpus named ``host`` (default: the result's),
    or why there is none. Pure.

    Errors: "unreachable: <ssh's message>", "timeout: no answer within N s",
    "exit N: <stderr's last line>", "bad JSON: ...".
    """
    host = host or result.host
    why = why_no_answer(result, timeout)
    return parse_topo_answer(host, result.stdout) if why is None else failed(host, why)


def _probe_here(timeout: float):
    """This machine's probe, in-process: the answer ``topo --json`` would print."""
    def answer(name: str) -> str:
        from mlp_magic.gpu.probe import probe_local

        return json.dumps({name: probe_local(timeout=timeout * PROBE_SHARE, host=name).to_dict()})
    return InThisProcess(answer, "local probe")


def start_over_ssh(hosts: Iterable[Any], *, timeout: float, ssh: Any = None,
                   connect_timeout: float = 5.0, python: str | None = None, fanout: int = 64,
                   env: Mapping[str, str] | None = None) -> Underway:
    """Start asking every host: an Underway whose ``finish(deadline)`` gives host name ->
    HostGpus for every host (``collect_over_ssh`` waits for it; ``stop()`` stops its ssh).

    ``hosts``: names (``[user@]name``) or topology.Host objects (``name``, ``user``, ``port``).
    Each remote host runs ``python -m mlp_magic.cli topo --json`` (``python``: this
    interpreter, the image being the same everywhere) over ssh (fanout/hosts);
    ``ssh``: the client command (default ``$MLP_MAGIC_SSH``, else ``ssh``). This machine
    (its names, without an explicit port) is probed in-process, never over ssh, and reported
    under each of its names. A host that cannot answer gets ``HostGpus(source="none", error=...)``:
    "unreachable: ...", "timeout: no answer within N s", "exit N: ...", "bad JSON: ...", or why
    the ssh client cannot be used. Hosts beyond ``fanout`` wait for a free connection slot,
    inside the same deadline.
    """
    if not timeout or timeout <= 0:
        raise MlpMagicError("GPU collect: timeout must be positive, got %r" % (timeout,))
    if not connect_timeout or connect_timeout <= 0:
        raise MlpMagicError("GPU collect: connect timeout must be positive, got %r" % (connect_timeout,))
    try:
        there: Any = Shell(ssh, env, connect_timeout=connect_timeout, at_once=fanout,
                           max_bytes=MAX_ANSWER_BYTES)
    except MlpMagicError as exc:   # no ssh client, or an --ssh that cannot be split: each remote host says
        there = Refused(str(exc))
    command = topo_command(python or sys.executable, timeout * PROBE_SHARE)
    fan = start(hosts, command, timeout=timeout, there=there, here=_probe_here(timeout))

    def finish(deadline: float) -> dict[str, HostGpus]:
        found = fan.finish(deadline)
        return {name: inventory_from_result(fan.answer_for(name, found), timeout, name) for name in fan.given}

    return Underway(finish, fan.stop, fan.wait)


def collect_over_ssh(hosts: Iterable[Any], *, timeout: float = 5.0, **options: Any) -> dict[str, HostGpus]:
    """host name -> HostGpus for every host, in the order given, within about ``timeout`` s
    (``start_over_ssh``'s options)."""
    started = time.monotonic()
    underway = start_over_ssh(hosts, timeout=timeout, **options)
    return underway.finish(started + timeout)
