"""Can this machine reach the World's other hosts the way the launcher will (ssh)? Asked beside
the launch, never in its way.

mpiexec starts remote ranks over ssh and says little when a host cannot be reached: a host with
no route cost 68 s and "rank 0 logged nothing", ssh's own message nowhere. While the launcher
starts, each remote host gets ``ssh HOST true`` (BatchMode, a ConnectTimeout: allrun's runner,
no connection kept); a host ssh cannot connect to fails the start at once, with ssh's words. A
host that answers costs nothing: the launch went on meanwhile. Unknown host names are refused
before anything starts (``refuse_unknown_names``), as allrun refuses them.
"""
from __future__ import annotations

import asyncio
import time

from mlp_magic import config
from mlp_magic.machine.deadline import run_to_end
from mlp_magic.machine.names import stays_here
from mlp_magic.core.ranges import fold_hosts
from mlp_magic.core.results import UNREACHABLE, last_line
from mlp_magic.errors import MlpMagicError

CONNECT_TIMEOUT_S = 10.0   # ssh's ConnectTimeout for the check: a host with no route is known then


def refuse_unknown_names(host_names: list) -> None:
    """One line for a host name that neither the resolver nor the ssh configuration knows (ssh -G
    per host, no connection), before anything starts."""
    from mlp_magic.ssh.argv import as_targets
    from mlp_magic.ssh.names import check_names

    remote = [name for name in host_names if not stays_here(name)]
    if remote:   # on the kernel's thread, inside its running loop in a Jupyter kernel
        run_to_end(lambda: check_names(as_targets(remote), config.ssh_command(default=None)),
                   "mlp-world-names")


class ReachCheck:
    """``ssh HOST true`` to every remote host, in the background; ``wake()`` is called when every
    host answered, so that a start waiting on its engines looks at ``unreachable()`` at once."""

    def __init__(self, host_names: list, wake):
        from mlp_magic.machine.deadline import in_background
        from mlp_magic.ssh.argv import NO_REUSE
        from mlp_magic.ssh.runner import HostRunner, RunOptions

        self.hosts = [name for name in host_names if not stays_here(name)]
        self._runner = self._pending = None
        if not self.hosts:
            return
        options = RunOptions(ssh=config.ssh_command(), connect_timeout=CONNECT_TIMEOUT_S, local=False,
                             control=NO_REUSE, timeout=CONNECT_TIMEOUT_S + 5)
        self._runner = HostRunner(self.hosts, "true", options)

        def check():
            try:
                return asyncio.run(self._runner.run())
            finally:
                wake()
        self._pending = in_background(check, "mlp-world-reach")

    def unreachable(self) -> dict:
        """{host: ssh's last line} of the hosts ssh could not connect to (so far)."""
        if self._runner is None:
            return {}
        return {result.host: last_line(result.stderr) or "ssh could not connect"
                for result in self._runner.results if result.status == UNREACHABLE}

    def settle(self, seconds: float) -> dict:
        """``unreachable()`` once every host answered, or after ``seconds``."""
        if self._pending is not None:
            self._pending.wait(time.monotonic() + seconds)
        return self.unreachable()

    def stop(self) -> None:
        """The hosts not answered yet are given up (their ssh stopped), within a moment."""
        if self._pending is not None and not self._pending.wait(time.monotonic()):
            self._runner.request_interrupt()
            self._pending.wait(time.monotonic() + 5.0)


def unreachable_error(unreachable: dict) -> MlpMagicError:
    """The start's failure: the hosts ssh cannot reach, each with ssh's own words."""
    by_why: dict = {}
    for host, why in unreachable.items():
        by_why.setdefault(why, []).append(host)
    parts = "; ".join(f"{fold_hosts(hosts)}: {why}" for why, hosts in by_why.items())
    return MlpMagicError(f"the World did not start: ssh cannot reach {parts} (the launcher starts the "
                         "ranks there over ssh: `allrun -H HOSTS hostname` checks it)")
