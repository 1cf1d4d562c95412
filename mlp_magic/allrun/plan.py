"""What one allrun does, checked before anything runs, and running it.

  options -> hosts (the Topology, minus --exclude) -> a Plan (targets, ssh, copy) -> the ssh
  transport's HostRunners (a --copy first, then the command) -> HostResults in host order.

Running is blocking and interruptible (``bridge.run_blocking``). The allrun command starts the
hosts' processes ahead (``Plan.start_early``), before asyncio is imported.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from mlp_magic import config
from mlp_magic.core.results import INTERRUPTED, OK, HostResult
from mlp_magic.errors import MlpMagicError


def select_hosts(options, env: Mapping | None = None):
    """(hosts, topology): one target per host of the Topology, minus ``--exclude``."""
    from mlp_magic.core.ranges import expand_hosts, fold_hosts
    from mlp_magic.machine.topology import topology_from_environment

    env = os.environ if env is None else env
    topology = topology_from_environment(env, hostfile=options.hostfile, hosts=options.hosts)
    hosts = list(topology.hosts)
    if options.exclude:
        excluded = expand_hosts(options.exclude)
        names = {host.name for host in hosts}
        unknown = [name for name in excluded if name not in names]
        if unknown:
            raise MlpMagicError(f"--exclude: {unknown[0]!r} is not one of the hosts "
                                f"({fold_hosts([h.name for h in hosts])}, from {topology.source})")
        hosts = [host for host in hosts if host.name not in excluded]
        if not hosts:
            raise MlpMagicError(f"--exclude {options.exclude!r} leaves no host to run on")
    return hosts, topology


class Plan:
    """What one allrun does, checked before anything runs: hosts, transport settings, copy."""

    def __init__(self, options, env: Mapping | None = None, check_names: bool = True):
        from mlp_magic.ssh.argv import as_targets, check_copy_source, find_program

        self.options = options
        hosts, self.topology = select_hosts(options, env)
        self.targets = as_targets(hosts)
        self.local = len(self.targets) == 1 and self.targets[0].is_local
        self.ssh = config.ssh_command(options.ssh, env)
        if not self.local and find_program(self.ssh[0]) is None:
            raise MlpMagicError(f"--ssh: cannot find the command {self.ssh[0]!r}")
        if options.copy:
            check_copy_source(options.copy[0])
        if options.outdir:
            _check_outdir(options.outdir)   # before anything starts
        # Unknown host names are refused by the transport before any command runs (the check
        # overlaps the ssh handshakes; commands wait for it).
        self.check_names = check_names

    def start_early(self):
        """Start every host's ssh now, before the event loop and asyncio's import (the CLI's cold
        start: the handshakes, most of the time, overlap the interpreter's remaining start-up).
        Returns the Launch for ``run_plan``, or None where the run cannot start this way."""
        from mlp_magic.ssh.spawn import Launch, gated

        options = self.options
        if options.copy or not options.command.strip() or options.fanout < len(self.targets):
            return None   # a copy goes first, or hosts wait for fanout slots
        launch = Launch(self.targets, options.command, ssh=self.ssh, local=self.local,
                        connect_timeout=options.connect_timeout,
                        gated=gated(self.check_names, None, options.fanout, len(self.targets)))
        launch.start_all()
        return launch

    def runner_options(self, check_names: bool, **more):
        """The transport's RunOptions for this plan (``more``: outdir, stdin_path)."""
        from mlp_magic.ssh.runner import RunOptions

        options = self.options
        return RunOptions(ssh=self.ssh, fanout=options.fanout, connect_timeout=options.connect_timeout,
                          timeout=options.timeout, local=self.local,
                          check_names=check_names and self.check_names, **more)


def _check_outdir(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise MlpMagicError(f"--outdir {path!r}: {err.strerror or err}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise MlpMagicError(f"--outdir {path!r}: not writable")


def run_plan(plan: Plan, on_output: Callable | None = None, early=None,
             interrupted: bool = False) -> list[HostResult]:
    """Copy (when asked), then run the command; blocking, Ctrl-C keeps partial results.
    ``early``: the Launch of ``plan.start_early()``, its processes already running;
    ``interrupted``: a Ctrl-C came before (the runners start stopped, and stop what started)."""
    try:
        return _run_plan(plan, on_output, early, interrupted)
    finally:
        if early is not None:
            early.stop_unclaimed()   # a second Ctrl-C before the runner took them


def _run_plan(plan: Plan, on_output: Callable | None, early, interrupted: bool = False) -> list[HostResult]:
    # threads and asyncio: after the hosts' processes started
    from mlp_magic.allrun.bridge import run_blocking
    from mlp_magic.ssh.argv import copy_command
    from mlp_magic.ssh.runner import HostRunner

    options = plan.options
    results: dict[str, HostResult] = {}
    targets = plan.targets
    if options.copy:
        src, dest = options.copy
        copy = HostRunner(targets, copy_command(src, dest or os.path.abspath(src)),
                          plan.runner_options(check_names=True, stdin_path=src))
        copied = run_blocking(copy, on_output, interrupted)
        for result in copied:
            if result.status != OK:   # this host's result is the failed copy
                result.stderr = f"allrun: --copy {src} failed\n{result.stderr}"
                results[result.host] = result
            elif not options.command.strip():
                results[result.host] = result
        if any(r.status == INTERRUPTED for r in copied):
            targets = []   # Ctrl-C during the copy: do not go on to the command
        targets = [t for t in targets if t.name not in results]
    if targets and options.command.strip():
        runner = HostRunner(targets, options.command,
                            plan.runner_options(check_names=not options.copy, outdir=options.outdir),
                            launch=early)
        for result in run_blocking(runner, on_output, interrupted):
            results[result.host] = result
    return [results.get(t.name) or HostResult(t.name, INTERRUPTED, None) for t in plan.targets]
