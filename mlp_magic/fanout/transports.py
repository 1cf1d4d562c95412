"""The ways a fan-out reaches hosts (fanout/hosts picks one for this machine, one for the others).

Each transport's ``start(targets, command, timeout, on_output)`` is an Underway whose finish
gives {host name: HostResult}, as allrun's runner reports a host:
- ``Shell``: the command in a shell, over ssh (allrun's runner) or this machine's own ``sh``;
- ``Engines``: through a live World's engines, one per host (a message round trip, no ssh);
- ``InThisProcess``: this machine, answered by a function of ours in a thread (no process);
- ``Refused``: a transport that could not be made (a bad ``--ssh``): each of its hosts says why.
A transport that fails as a whole reports each of its hosts as failed, with why
(``no_answer``: a failure with no exit status, which ``core/results.why_no_answer`` says as is).
"""
from __future__ import annotations

import time
from collections.abc import Callable

from mlp_magic import config
from mlp_magic.core.results import FAILED, INTERRUPTED, TIMEOUT, HostResult, last_line
from mlp_magic.errors import MlpMagicError
from mlp_magic.fanout.underway import Underway
from mlp_magic.machine.deadline import in_background

DEFAULT_MAX_BYTES = 8 << 20   # as allrun's: output kept in memory per stream per host


def no_answer(names: list, why: str) -> dict:
    """{host: a failure that says ``why``} for every host of ``names``."""
    return {name: HostResult(name, status=FAILED, exit_code=None, stderr=why) for name in names}


class Refused:
    """A transport that could not be made: each of its hosts answers ``why``."""

    def __init__(self, why: str):
        self.why = why

    def start(self, targets: list, command: str, timeout: float, on_output=None) -> Underway:
        found = no_answer([t.name for t in targets], self.why)
        return Underway(lambda deadline: found, wait=lambda deadline: True, so_far=lambda: found)   # all in


class Shell:
    """The command in a shell on each host: over ssh (``local=False``), or this machine's ``sh``.

    Every host's ssh starts at once when they are at most ``at_once`` (the handshakes overlap
    what the caller does next), else that many at a time; they are followed in a thread with
    its own event loop. ``reuse=False``: no ControlMaster (a one-off call leaves no connection).
    ``on_done()`` is called once every host answered. A bad or missing ssh client is refused
    here, before anything starts (MlpMagicError, its message starting ``--ssh:``)."""

    def __init__(self, ssh=None, env=None, *, local: bool = False, connect_timeout: float = 5.0,
                 reuse: bool = True, at_once: int = 256, max_bytes: int = DEFAULT_MAX_BYTES,
                 on_done: Callable[[], None] | None = None):
        from mlp_magic.ssh.argv import find_program

        self.ssh = [] if local else config.ssh_command(ssh, env)
        if self.ssh and find_program(self.ssh[0]) is None:
            raise MlpMagicError(f"--ssh: cannot find the command {self.ssh[0]!r}")
        self.local, self.connect_timeout, self.reuse = local, connect_timeout, reuse
        self.at_once, self.max_bytes, self.on_done = at_once, max_bytes, on_done

    def start(self, targets: list, command: str, timeout: float, on_output=None) -> Underway:
        from mlp_magic.ssh.argv import NO_REUSE
        from mlp_magic.ssh.spawn import Launch

        launch = Launch(targets, command, ssh=self.ssh or ("ssh",), local=self.local,
                        connect_timeout=min(self.connect_timeout, timeout),
                        control=None if self.reuse else NO_REUSE)
        runner, pending = self._follow(launch, timeout, on_output)
        names = [t.name for t in launch.targets]

        def results() -> dict:
            if pending.error is not None:
                return no_answer(names, f"ssh transport: {last_line(str(pending.error)) or pending.error!r}")
            return {result.host: result for result in list(runner.results)}

        def finish(deadline: float) -> dict:
            pending.wait(deadline)   # the late hosts are stopped meanwhile: they say "interrupted"
            return results()

        def so_far() -> dict:
            return {host: r for host, r in results().items() if r.status != INTERRUPTED}

        return Underway(finish, pending.stop, pending.ended_by, so_far)

    def _follow(self, launch, timeout: float, on_output) -> tuple:
        """(HostRunner, BackgroundRun) following ``launch``'s hosts; the runner (asyncio) is
        imported only once the first ssh started; its processes are stopped if it cannot be made."""
        fanout = min(len(launch.targets), self.at_once)
        if fanout == len(launch.targets):
            launch.start_all()
        try:
            from mlp_magic.fanout.background import BackgroundRun
            from mlp_magic.ssh.runner import HostRunner, RunOptions

            options = RunOptions(ssh=launch.ssh, fanout=fanout, timeout=timeout, local=launch.local,
                                 max_bytes=self.max_bytes, connect_timeout=launch.connect_timeout)
            runner = HostRunner(launch.targets, launch.command, options, launch=launch, on_output=on_output)
        except BaseException:
            launch.stop_unclaimed()
            raise
        return runner, BackgroundRun(runner, "mlp-fanout-shell", then=self.on_done)


class Engines:
    """Through a live World's engines, one per host (``transport``: allrun/via_engines'
    WorldTransport); it runs when the fan-out is finished, after the other parts started."""

    def __init__(self, transport):
        self.transport = transport

    def start(self, targets: list, command: str, timeout: float, on_output=None) -> Underway:
        names = [t.name for t in targets]

        def finish(deadline: float) -> dict:
            left = min(timeout, max(0.5, deadline - time.monotonic()))
            return {result.host: result for result in self.transport(names, command, left, on_output)}

        return Underway(finish)


class InThisProcess:
    """This machine, answered by ``answer(name)`` (the text the command would print; ``name``:
    the one this machine is asked under) in a thread of this process: no process to start.
    ``what`` names it in a failure ("local scan: ..."); ``stop()``, if given, ends its work when
    the answer comes too late."""

    def __init__(self, answer: Callable[[str], str], what: str, stop: Callable[[], None] | None = None):
        self.answer, self.what, self.stop = answer, what, stop

    def start(self, targets: list, command: str, timeout: float, on_output=None) -> Underway:
        [name] = [t.name for t in targets]   # this machine, once
        started = time.monotonic()
        thread = "mlp-fanout-" + self.what.replace(" ", "-")
        pending = in_background(lambda: self.answer(name), thread)

        def finish(deadline: float) -> dict:
            text = pending.result(deadline)
            if text is not None:
                return {name: HostResult(name, stdout=text, seconds=time.monotonic() - started)}
            if pending.error is not None:
                return no_answer([name], f"{self.what}: {pending.error!r}")
            if self.stop is not None:
                self.stop()   # late: its work must not outlive the answer
            return {name: HostResult(name, status=TIMEOUT, exit_code=None)}

        return Underway(finish, self.stop, pending.wait)
