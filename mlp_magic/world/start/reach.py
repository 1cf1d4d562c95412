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

import time

from mlp_magic import config
from mlp_magic.machine.deadline import run_to_end
from mlp_magic.fanout.hosts import names_elsewhere
from mlp_magic.core.ranges import fold_hosts
from mlp_magic.core.results import UNREACHABLE, last_line
from mlp_magic.errors import MlpMagicError

CONNECT_TIMEOUT_S = 10.0   # ssh's ConnectTimeout for the check: a host with no route is known then


def refuse_unknown_names(host_names: list) -> None:
    """One line for a host name that neither the resolver nor the ssh configuration knows (ssh -G
    per host, no connection), before anything starts."""
    from mlp_magic.ssh.argv import as_targets
    from mlp_magic.ssh.names import check_names

    remote = names_elsewhere(host_names)
    if remote:   # on the kernel's thread, inside its running loop in a Jupyter kernel
        run_to_end(lambda: check_names(as_targets(remote), config.ssh_command(default=None)),
                   "mlp-world-names")


class ReachCheck:
    """``ssh HOST true`` to every remote host, in the background (fanout/hosts, no connection
    kept); ``wake()`` is called when every host answered, so that a start waiting on its engines
    looks at ``unreachable()`` at once."""

    def __init__(self, host_names: list, wake):
        from mlp_magic.fanout.hosts import SKIP, start
        from mlp_magic.fanout.transports import Shell

        self.hosts = names_elsewhere(host_names)
        self._fan = None
        if self.hosts:
            ssh = Shell(connect_timeout=CONNECT_TIMEOUT_S, reuse=False, on_done=wake)
            self._fan = start(self.hosts, "true", timeout=CONNECT_TIMEOUT_S + 5, there=ssh, here=SKIP)

    def unreachable(self) -> dict:
        """{host: ssh's last line} of the hosts ssh could not connect to (so far)."""
        if self._fan is None:
            return {}
        return {host: last_line(result.stderr) or "ssh could not connect"
                for host, result in self._fan.so_far().items() if result.status == UNREACHABLE}

    def settle(self, seconds: float) -> dict:
        """``unreachable()`` once every host answered, or after ``seconds``."""
        if self._fan is not None:
            self._fan.wait(time.monotonic() + seconds)
        return self.unreachable()

    def stop(self) -> None:
        """The hosts not answered yet are given up (their ssh stopped), within a moment."""
        if self._fan is not None:
            self._fan.stop()


def unreachable_error(unreachable: dict) -> MlpMagicError:
    """The start's failure: the hosts ssh cannot reach, each with ssh's own words."""
    by_why: dict = {}
    for host, why in unreachable.items():
        by_why.setdefault(why, []).append(host)
    parts = "; ".join(f"{fold_hosts(hosts)}: {why}" for why, hosts in by_why.items())
    return MlpMagicError(f"the World did not start: ssh cannot reach {parts} (the launcher starts the "
                         "ranks there over ssh: `allrun -H HOSTS hostname` checks it)")
