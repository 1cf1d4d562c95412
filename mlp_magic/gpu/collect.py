"""GPU inventories of many hosts at once: through a World's engines (each host's first rank runs
``gpu/probe.probe_on_engine``; the kernel's side is gpu/engines, one RankJob), or over ssh.

ssh (``collect_over_ssh``), for hosts no World covers: the allrun transport runs
``<python> -m mlp_magic.cli topo --json`` on every host at once (the same image on every host),
this machine is probed in-process meanwhile, and one deadline bounds the whole call.
"""
from __future__ import annotations

import shlex
import sys
import time
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence

from mlp_magic import config
from mlp_magic.machine.deadline import in_background
from mlp_magic.machine.names import stays_here, this_machine_names
from mlp_magic.core.results import HostResult, why_no_answer
from mlp_magic.errors import MlpMagicError
from mlp_magic.ranks.remote_errors import one_line
from mlp_magic.ssh.underway import Underway, start_all
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


def inventory_from_result(result: HostResult, timeout: float) -> HostGpus:
    """One host's transport result -> its HostGpus, or why there is none. Pure.

    Errors: "unreachable: <ssh's message>", "timeout: no answer within N s",
    "exit N: <stderr's last line>", "bad JSON: ...".
    """
    why = why_no_answer(result, timeout)
    return parse_topo_answer(result.host, result.stdout) if why is None else failed(result.host, why)


def _start_local(names: Sequence[str], timeout: float) -> Underway:
    """Probe this machine once (in a thread), reported under each of its names."""
    from mlp_magic.gpu.probe import probe_local

    pending = in_background(lambda: probe_local(timeout=timeout * PROBE_SHARE, host=names[0]),
                            "mlp-gpu-collect")

    def finish(deadline: float) -> Dict[str, HostGpus]:
        found = pending.result(deadline)
        if not isinstance(found, HostGpus):
            why = ("local probe: %s" % pending.error if pending.error is not None
                   else "timeout: no answer within %g s" % timeout)
            return {name: failed(name, why) for name in names}
        return {name: HostGpus.from_dict(dict(found.to_dict(), host=name)) for name in names}

    return Underway(finish)


def _start_remote(targets: Sequence[Any], ssh: Any, env: Optional[Mapping[str, str]], python: str,
                  timeout: float, connect_timeout: float, fanout: int) -> Underway:
    """Run the topo command on every target over ssh (in a thread with its own event loop); its
    finish takes a deadline and gives {host: HostGpus}."""
    from mlp_magic.ssh.runner import BackgroundRun, HostRunner, RunOptions

    names = [t.name for t in targets]
    try:
        options = RunOptions(ssh=config.ssh_command(ssh or None, env), fanout=fanout, timeout=timeout,
                             connect_timeout=min(connect_timeout, timeout), local=False,
                             max_bytes=MAX_ANSWER_BYTES)
        runner = HostRunner(targets, topo_command(python, timeout * PROBE_SHARE), options)
    except MlpMagicError as exc:  # no ssh client, or an --ssh that cannot be split: each remote host says
        why = str(exc)
        return Underway(lambda deadline: {name: failed(name, why) for name in names})
    pending = BackgroundRun(runner, "mlp-gpu-collect")

    def finish(deadline: float) -> Dict[str, HostGpus]:
        pending.wait(deadline)   # late hosts are stopped in the background and report "timeout"
        if pending.error is not None:
            return {name: failed(name, "ssh transport: %s" % one_line(pending.error)) for name in names}
        return {r.host: inventory_from_result(r, timeout) for r in list(runner.results)}

    return Underway(finish, pending.stop)


def start_over_ssh(hosts: Iterable[Any], *, timeout: float, ssh: Any = None,
                   connect_timeout: float = 5.0, python: Optional[str] = None,
                   local_names: Optional[Iterable[str]] = None, fanout: int = 64,
                   env: Optional[Mapping[str, str]] = None) -> Underway:
    """Start asking every host: an Underway whose ``finish(deadline)`` gives host name ->
    HostGpus for every host (``collect_over_ssh`` waits for it; ``stop()`` stops its ssh).

    ``hosts``: names (``[user@]name``) or topology.Host objects (``name``, ``user``, ``port``).
    Each remote host runs ``python -m mlp_magic.cli topo --json`` (``python``: this
    interpreter, the image being the same everywhere) through the allrun ssh transport;
    ``ssh``: the client command (default ``$MLP_MAGIC_SSH``, else ``ssh``). This machine
    (``local_names``, without an explicit port) is probed in-process, never over ssh. A host
    that cannot answer gets ``HostGpus(source="none", error=...)``: "unreachable: ...",
    "timeout: no answer within N s", "exit N: ...", "bad JSON: ...". Hosts beyond ``fanout``
    wait for a free connection slot, inside the same deadline.
    """
    from mlp_magic.ssh.argv import as_targets

    if not timeout or timeout <= 0:
        raise MlpMagicError("GPU collect: timeout must be positive, got %r" % (timeout,))
    if not connect_timeout or connect_timeout <= 0:
        raise MlpMagicError("GPU collect: connect timeout must be positive, got %r" % (connect_timeout,))
    targets = as_targets(list(hosts))
    names = this_machine_names() if local_names is None else frozenset(n.lower() for n in local_names)
    local = [t.name for t in targets if stays_here(t.name, t.port, names)]
    remote = [t for t in targets if not stays_here(t.name, t.port, names)]
    starts = []
    if remote:
        starts.append(lambda: _start_remote(remote, ssh, env, python or sys.executable, timeout,
                                            connect_timeout, fanout))
    if local:
        starts.append(lambda: _start_local(local, timeout))
    parts = start_all(starts)

    def finish(deadline: float) -> Dict[str, HostGpus]:
        found = parts.finish(deadline)
        return {t.name: found[t.name] for t in targets}

    return Underway(finish, parts.stop)


def collect_over_ssh(hosts: Iterable[Any], *, timeout: float = 5.0, **options: Any) -> Dict[str, HostGpus]:
    """host name -> HostGpus for every host, in the order given, within about ``timeout`` s
    (``start_over_ssh``'s options)."""
    started = time.monotonic()
    underway = start_over_ssh(hosts, timeout=timeout, **options)
    return underway.finish(started + timeout)
