"""While a cell runs on ranks of other hosts: which hosts stopped answering (a link down, a host
powered off), within seconds rather than at the controller's heartbeat limit (a minute and more:
it is sized for a slow start).

One thread asks every watched host at once, every ``PROBE_EVERY_S``, with a TCP connect to its
agent's port (non-blocking connects, one ``select``): a host that accepts or refuses answered
(its kernel did, whatever its processes do); one whose connect times out did not. A host with no
answer for ``LOST_AFTER_S`` is lost: the thread wakes the cell's wait, which ends the cell for
that host's ranks (mpirun/run). Hosts with no agent, and this machine, are not watched.
"""
from __future__ import annotations

import errno
import select
import socket
import threading
import time

from mlp_magic.machine.names import stays_here

PROBE_EVERY_S = 2.0
PROBE_TIMEOUT_S = 2.0
LOST_AFTER_S = 10.0
_ANSWERED = (0, errno.ECONNREFUSED, errno.ECONNRESET)


class HostWatch:
    """Watches ``hosts`` (name -> (addr, port)) until ``stop()``; ``lost`` names those that
    stopped answering, ``wake()`` is called once for each."""

    def __init__(self, hosts: dict, wake, clock=time.monotonic, lost_after: float = LOST_AFTER_S):
        self.hosts, self.wake, self.clock, self.lost_after = hosts, wake, clock, lost_after
        self.lost: dict = {}   # host -> seconds it had not answered when given up on
        self._answered = {host: clock() for host in hosts}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mlp-host-watch", daemon=True)
        if hosts:
            self._thread.start()

    @classmethod
    def of_cell(cls, world, ranks: list, wake) -> "HostWatch":
        """The other hosts the cell's ranks run on, each through its agent's address and port."""
        hosts = {}
        for host in dict.fromkeys(world.host_of(rank) for rank in ranks):
            agent = (world.agents or {}).get(host) or {}
            if "port" in agent and not world.spec.topology.is_local and not stays_here(host):
                hosts[host] = (agent["addr"], agent["port"])
        return cls(hosts, wake)

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(PROBE_EVERY_S):
            try:
                answered = probe({h: a for h, a in self.hosts.items() if h not in self.lost}, PROBE_TIMEOUT_S)
            except OSError:   # out of descriptors, say: no verdict this round
                continue
            now = self.clock()
            for host in answered:
                self._answered[host] = now
            for host in self.hosts:
                silent = now - self._answered[host]
                if host not in self.lost and silent >= self.lost_after:
                    self.lost[host] = silent
                    self.wake()


def probe(hosts: dict, timeout: float) -> set:
    """The hosts (name -> (addr, port)) whose kernel answered a TCP connect within ``timeout``."""
    pending, answered = {}, set()
    for host, (addr, port) in hosts.items():
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex((addr, port))
        if code in _ANSWERED:
            answered.add(host)
            sock.close()
        elif code in (errno.EINPROGRESS, errno.EWOULDBLOCK):
            pending[sock] = host
        else:
            sock.close()   # no route, network down: no answer
    deadline = time.monotonic() + timeout
    try:
        while pending and (left := deadline - time.monotonic()) > 0:
            _, ready, _ = select.select([], list(pending), [], left)
            for sock in ready:
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) in _ANSWERED:
                    answered.add(pending[sock])
                del pending[sock]
                sock.close()
    finally:
        for sock in pending:
            sock.close()
    return answered
