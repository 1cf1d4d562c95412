"""One fan-out to hosts: a command on a set of hosts under one deadline, each host through the
transport that reaches it (fanout/transports), every answer as allrun's runner reports a host
(``core/results.HostResult``). The GPU inventories, the stacks, the doctor, the hang report's
dumps and the launcher's reach check each give a command and read the answers.

This machine (``machine/names.stays_here``: its names, 127.x, no explicit port) is asked once,
under the first of its names given, through ``here``; the other hosts through ``there``:
- ``here=SKIP``: this machine is not asked (the launcher needs no ssh to itself);
- ``here`` the same transport as ``there``: one call for all (a World's engines reach this
  machine too);
- ``here=None``: no split, every host through ``there``.
The transport's parts start at once, ``there`` first (its handshakes overlap the rest), and are
finished against one deadline; an error or a Ctrl-C stops every part that started.
"""
from __future__ import annotations

from collections.abc import Iterable

from mlp_magic.core.results import HostResult
from mlp_magic.fanout.transports import no_answer
from mlp_magic.fanout.underway import start_all
from mlp_magic.machine.names import stays_here, this_machine_names

SKIP = "skip"


class FanOut:
    """A fan-out under way. ``given``: every host name given, in order; ``asked``: those asked
    (this machine once); ``also_here``: {another name of this machine given: the name it was
    asked under}."""

    def __init__(self, given: list, asked: list, also_here: dict, parts):
        self.given, self.asked, self.also_here, self._parts = given, asked, also_here, parts

    def finish(self, deadline: float) -> dict:
        """{name: HostResult} of every host asked, by ``deadline``: a host still running then is
        stopped, and says "interrupted" (``why_no_answer``: "timeout: no answer within N s"); one
        its transport said nothing of says "no answer"."""
        found = self._parts.finish(deadline)
        return {name: found.get(name) or no_answer([name], "no answer")[name] for name in self.asked}

    def wait(self, deadline: float) -> bool:
        """Whether every host answered by ``deadline``; none is stopped."""
        return self._parts.wait(deadline)

    def so_far(self) -> dict:
        """{name: HostResult} of the hosts that answered already."""
        return self._parts.so_far()

    def stop(self) -> None:
        """Stop every host still running (its ssh, its remote command), within a moment."""
        self._parts.stop()

    def answer_for(self, name: str, found: dict) -> HostResult | None:
        """The answer in ``found`` (``finish``'s) for a host name given, this machine's any of its."""
        return found.get(self.also_here.get(name, name))


def host_names(hosts: Iterable) -> list:
    """The names of ``hosts`` (``[user@]name`` strings or topology Hosts), as a fan-out asks them."""
    return [name for name, _ in _names_and_ports(hosts)]


def names_elsewhere(hosts: Iterable) -> list:
    """The names of the hosts that are not this machine: those a transport must reach from here."""
    return [name for name, port in _names_and_ports(hosts) if not stays_here(name, port)]


def _names_and_ports(hosts: Iterable) -> list:
    from mlp_magic.ssh.argv import as_target

    return [(target.name, target.port) for target in map(as_target, hosts)]


def start(hosts: Iterable, command: str, *, timeout: float, there, here=None, on_output=None) -> FanOut:
    """Start ``command`` on every host (names ``[user@]name[:port]``, or topology Hosts), each
    host's run bounded by ``timeout`` s; ``on_output(host, stream, line)``: each line as it comes
    (the transports that stream). Raises MlpMagicError for a host list that cannot be (empty,
    a name twice), before anything starts."""
    from mlp_magic.ssh.argv import as_targets

    targets = as_targets(list(hosts))
    if here is None:
        groups, asked, also_here = [(there, targets)], targets, {}
    else:
        names = this_machine_names()
        local = [t for t in targets if stays_here(t.name, t.port, names)]
        remote = [t for t in targets if not stays_here(t.name, t.port, names)]
        also_here = {} if here is SKIP else {t.name: local[0].name for t in local[1:]}
        if here is SKIP:
            groups = [(there, remote)]
        elif here is there:
            groups = [(there, remote + local[:1])]
        else:
            groups = [(there, remote), (here, local[:1])]
        chosen_names = {t.name for _, chosen in groups for t in chosen}
        asked = [t for t in targets if t.name in chosen_names]   # in the order given
    parts = start_all(lambda transport=transport, chosen=chosen: transport.start(chosen, command, timeout,
                                                                                 on_output)
                      for transport, chosen in groups if chosen)
    return FanOut([t.name for t in targets], [t.name for t in asked], also_here, parts)
