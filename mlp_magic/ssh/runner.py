"""Run one shell command on many hosts through the system OpenSSH client (asyncio, bounded fanout).

Each host gets one ``ssh`` child process (``argv`` makes its command line and remote wrapper),
at most ``fanout`` at a time, with BatchMode, ConnectTimeout, accept-new host keys and a
ControlMaster socket in a private 0700 directory so a second call reuses the connections.
Processes are started by ``launch`` (possibly before the event loop exists: the CLI starts
them ahead) and followed here (``streams``): their pipes on the loop (epoll, no ``select()``
limit), their end through a pidfd (no thread per child).

A remote command whose stdin is free starts only when told "go", and "go" is written only once
its marker (naming its process group) has arrived: a host given up before that (interrupt,
timeout, connect deadline) gets its ssh killed, and the wrapper, if it started at all, reads the
end of its input and runs nothing. No command can run unseen, nor be left running.

Host statuses: ok, failed (non-zero exit), timeout, unreachable, interrupted.
"""
from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from mlp_magic.core.records import Record
from mlp_magic.core.results import FAILED, INTERRUPTED, OK, TIMEOUT, UNREACHABLE, HostResult
from mlp_magic.errors import MlpMagicError
from mlp_magic.ssh.argv import KILLER, Target, as_targets, destination, remote_command, ssh_options
from mlp_magic.ssh.spawn import Launch, gated
from mlp_magic.ssh.names import Gate, check_names
from mlp_magic.ssh.spawn import raise_nofile_limit, signal_group
from mlp_magic.core.host_command import BACKGROUND_GRACE_S, LEFT_IN_THE_BACKGROUND
from mlp_magic.ssh.streams import Child, Stream, pump, reap_bounded, wait_bounded

DEFAULT_MAX_BYTES = 8 << 20       # output kept in memory per stream per host (--outdir keeps all)
KILL_GRACE = 2.0                  # seconds between TERM and KILL of a remote process group
CONNECT_GRACE = 2.0               # beyond ConnectTimeout, for authentication and session start

OutputCallback = Callable[[str, str, str], None]   # (host, "stdout"|"stderr", line)


class RunOptions(Record):
    """How a HostRunner reaches and runs its hosts; every field has the usual default."""

    ssh: object = ("ssh",)            # the ssh client: an argv, or one string to split
    fanout: int = 64                  # at most this many hosts at a time
    connect_timeout: float = 10.0
    timeout: float | None = None      # per host, from the start of its ssh
    control: str | None = None        # ControlMaster directory (default: config.ssh_control_dir)
    local: bool | None = None         # run with a local sh (None: when the one host is this machine)
    outdir: str | None = None         # write <host>.stdout / .stderr there, every byte
    stdin_path: str | None = None     # a file as each host's stdin (--copy)
    max_bytes: int = DEFAULT_MAX_BYTES
    check_names: bool = False         # refuse unknown host names before any command runs


class HostRunner:
    """Run ``command`` on every host; ``results`` (input order) always holds what is known.

    ``await run()`` returns the results. ``interrupt()`` (from the loop's thread) stops every
    unfinished host: its remote process group is killed, what it printed is kept, and its
    status becomes ``interrupted``; ``run()`` then returns normally. Cancelling ``run()`` does
    the same cleanup and re-raises the cancellation.
    """

    def __init__(self, hosts, command: str, options: RunOptions | None = None, *,
                 on_output: OutputCallback | None = None, launch: Launch | None = None):
        """``launch``: a Launch of these hosts and this command whose processes may already run
        (``Launch.start_all``); its ssh, control, local, stdin and connect-timeout settings apply."""
        options = options or RunOptions()
        if not isinstance(options.fanout, int) or options.fanout < 1:
            raise MlpMagicError(f"fanout must be a positive integer, got {options.fanout!r}")
        if options.timeout is not None and not options.timeout > 0:
            raise MlpMagicError(f"timeout must be positive, got {options.timeout!r}")
        targets = as_targets(hosts)
        if launch is None:
            launch = _launch(targets, command, options)
        elif launch.command != command or [t.name for t in launch.targets] != [t.name for t in targets]:
            raise ValueError("HostRunner: the launch was made for other hosts or another command")
        self.launch = launch
        self.targets, self.command, self.local = launch.targets, command, launch.local
        self.ssh, self.control, self.stdin_path = launch.ssh, launch.control, launch.stdin_path
        self.fanout, self.timeout = options.fanout, options.timeout
        self.connect_timeout = launch.connect_timeout
        self.on_output, self.outdir, self.max_bytes = on_output, options.outdir, options.max_bytes
        self.check_names = options.check_names and not self.local
        self._gate: Gate | None = None
        self.results = [HostResult(t.name, status=INTERRUPTED, exit_code=None) for t in self.targets]
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._interrupt_asked = False

    def interrupt(self) -> None:
        """Stop the unfinished hosts (call from the loop's thread)."""
        self._interrupt_asked = True
        if self._stop is not None:
            self._stop.set()

    def request_interrupt(self) -> None:
        """``interrupt()`` from any thread, before or during ``run()``."""
        self._interrupt_asked = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.interrupt)
            except RuntimeError:
                pass  # the loop just closed: the run is over

    async def run(self) -> list[HostResult]:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._interrupt_asked:
            self._stop.set()
        raise_nofile_limit(8 * min(self.fanout, len(self.targets)) + 256)
        if self.outdir:
            os.makedirs(self.outdir, exist_ok=True)
        if self.launch.gated:
            self._gate = Gate(self)   # connect meanwhile; commands wait for the verdict
        elif self.check_names:
            # stdin carries a file, or hosts wait for fanout slots: check first, then run
            await check_names(self.targets, self.ssh, self.connect_timeout)
        limit = asyncio.Semaphore(self.fanout)
        tasks = [asyncio.ensure_future(self._run_host(i, limit)) for i in range(len(self.targets))]
        try:
            # asyncio.wait, not gather: being cancelled must not cancel the host tasks, which
            # have remote processes to kill first.
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            self._stop.set()
            await asyncio.wait(tasks, timeout=2 * KILL_GRACE + min(self.connect_timeout, 5.0) + 2)
            raise
        finally:
            if self._gate is not None:
                self._gate.close()
            self.launch.stop_unclaimed()   # started ahead for a host that never ran (cannot happen)
        if self._gate is not None and self._gate.refusal() is not None:
            raise self._gate.refusal()   # a bad host name: no command ran anywhere
        for task in tasks:
            if task.exception() is not None:
                raise task.exception()
        return self.results

    # one host

    async def _run_host(self, index: int, limit: asyncio.Semaphore) -> None:
        target = self.targets[index]
        async with limit:
            if self._stop.is_set() and index not in self.launch.started:
                return  # stays "interrupted", never started (one started ahead is stopped below)
            start = self.launch.started_at.get(index) or time.monotonic()
            out = self._stream(target.name, "stdout", None, self.launch.end_marker(index))
            err = self._stream(target.name, "stderr", self.launch.marker(index),
                               self.launch.end_marker(index))
            status, code = INTERRUPTED, None
            try:
                status, code = await self._execute(index, out, err)
            finally:  # also when cancelled: keep what arrived
                out.close()
                err.close()
                if status == FAILED and code == 255 and not err.saw_marker and not self.local:
                    status = UNREACHABLE   # ssh's own failure: the wrapper never ran
                stderr = err.text()
                if status == UNREACHABLE and not stderr:  # our connect deadline, not ssh's message
                    stderr = f"mlp_magic: no answer within {self.connect_timeout + CONNECT_GRACE:g} s\n"
                self.results[index] = HostResult(target.name, status, code, out.text(), stderr,
                                                 time.monotonic() - start)

    def _stream(self, host: str, name: str, marker: bytes | None, end_marker: bytes | None = None) -> Stream:
        path = os.path.join(self.outdir, f"{host}.{name}") if self.outdir else None
        return Stream(host, name, self.on_output, self.max_bytes, path, marker, end_marker)

    async def _execute(self, index: int, out: Stream, err: Stream) -> tuple[str, int | None]:
        target = self.targets[index]
        proc = Child(self.launch.start(index))
        try:
            await proc.attach()
        except BaseException:   # cancelled (or no pipe transport): nothing will follow it
            proc.kill()
            proc.close_pipes()
            await reap_bounded(proc)
            raise
        spawned = self.launch.started_at.get(index) or time.monotonic()
        drained = asyncio.ensure_future(self._drain(proc, out, err))
        stopper = asyncio.ensure_future(self._stop.wait())
        started = asyncio.ensure_future(err.started.wait())
        try:
            status = None
            if self._gate is not None:
                status = await self._pass_gate(index, err, drained, started, stopper)
            if status is None:
                status = await self._watch(proc, drained, stopper, started, spawned)
        except asyncio.CancelledError:
            proc.end_input()
            await self._kill(target, proc, err, drained)
            raise
        finally:
            stopper.cancel()
            started.cancel()
            proc.end_input()  # a wrapper still waiting for "go" reads the end of input: nothing runs
        if status is None:
            code = drained.result()
            if proc.status_lost:
                err._keep(b"mlp_magic: exit status lost (reaped elsewhere; is SIGCHLD ignored?)\n")
            return (OK if code == 0 else FAILED), code
        await self._kill(target, proc, err, drained)
        return status, (255 if status == UNREACHABLE else None)

    async def _pass_gate(self, index: int, err: Stream, drained, started, stopper) -> str | None:
        """Report this host to the gate and wait for its verdict: None to go on, INTERRUPTED for
        a refusal or an interrupt (stdin is then closed: the wrapper runs nothing)."""
        gate, reported = self._gate, False
        while not gate.opened.done():
            waiting = {gate.opened, stopper} | (set() if reported else {started, drained})
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if stopper in done:
                return INTERRUPTED
            if not reported and started in done:
                gate.connected(index)
                reported = True
            elif not reported and drained in done:
                gate.exited(index, err.text())
                reported = True
        return None if gate.refusal() is None else INTERRUPTED

    async def _watch(self, proc, drained, stopper, started, spawned: float) -> str | None:
        """Say "go" once the marker came; wait for the command's end (None), an interrupt, the
        command timeout, or, while the remote wrapper has not started, the connect deadline: a
        reused ssh connection to a host that vanished would otherwise hang past ConnectTimeout."""
        now = time.monotonic()
        command_deadline = now + self.timeout if self.timeout else None
        connect_deadline = None if self.local else spawned + self.connect_timeout + CONNECT_GRACE
        while True:
            if started.done() and not proc.released:
                proc.end_input(b"go\n")
            waiting = {drained, stopper} | ({started} if not started.done() else set())
            deadlines = [d for d in (command_deadline, None if started.done() else connect_deadline) if d]
            wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            done, _ = await asyncio.wait(waiting, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            if drained in done:
                return None
            if stopper in done:
                return INTERRUPTED
            now = time.monotonic()
            if command_deadline is not None and now >= command_deadline:
                return TIMEOUT
            if not started.done() and connect_deadline is not None and now >= connect_deadline:
                return UNREACHABLE

    @staticmethod
    async def _drain(proc: Child, out: Stream, err: Stream) -> int:
        """The command's exit status once its output is in. A process the command left in the
        background may hold the output open long after (``sh -c 'sleep 100 & echo bg'``, as a
        terminal does not wait for it): once the command ended (its process exited, or, over
        ssh, the wrapper's end marker came on both streams: ssh itself waits for the channel),
        its output is read for ``BACKGROUND_GRACE_S`` more, then left, and the host's stderr
        says so."""
        pumps = asyncio.gather(pump(proc.stdout, out), pump(proc.stderr, err))
        exited = asyncio.ensure_future(proc.wait())
        ended = asyncio.ensure_future(_both_ended(out, err))
        try:
            await asyncio.wait({exited, ended}, return_when=asyncio.FIRST_COMPLETED)
            await asyncio.wait({exited, pumps}, timeout=BACKGROUND_GRACE_S)
            held = not (exited.done() and pumps.done())
            if not exited.done():   # ssh, waiting for the channel the background process holds
                proc.kill()
                await wait_bounded(exited, 1.0)
            if not pumps.done():
                await _stop_reading(pumps, proc)
        finally:
            ended.cancel()
            exited.cancel()
        if held:
            err._keep(LEFT_IN_THE_BACKGROUND.encode())
        return err.end_status if err.end_status is not None else exited.result()

    async def _kill(self, target: Target, proc, err: Stream, drained: asyncio.Future) -> None:
        """Stop a host's command for real (TERM, then KILL after a grace period), keeping the
        output it had printed. Done means the channel closed: the remote group has exited."""
        for sig in (15, 9):
            if self.local:
                signal_group(proc.pid, sig)
            elif err.saw_marker and proc.released:  # it runs: signal its process group over ssh
                await self._signal_remote(target, err.remote_pid, "TERM" if sig == 15 else "KILL")
            else:
                # Nothing runs remotely: its wrapper got no "go" (and, with ssh gone, never will),
                # or a copy had not started (its input then ends early: a short file is refused).
                break
            await wait_bounded(drained, KILL_GRACE)
            if drained.done():
                return
        # Stop the local client. Its pipes may be held by a ControlMaster still waiting on a dead
        # connection, so stop reading them after a moment instead of waiting for their end.
        proc.kill()
        await wait_bounded(drained, 0.5)
        if not drained.done():
            await _stop_reading(drained, proc)
            await reap_bounded(proc)

    async def _signal_remote(self, target: Target, pid: int, signal_name: str) -> None:
        remote = remote_command(KILLER, "mlp_allrun_kill", str(pid), signal_name)
        argv = [*self.ssh, *ssh_options(min(self.connect_timeout, 5.0), self.control),
                *destination(target), remote]
        killer = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
        try:
            await asyncio.wait_for(killer.wait(), min(self.connect_timeout, 5.0) + 1)
        except asyncio.TimeoutError:
            killer.kill()
            await killer.wait()


async def _stop_reading(reading: asyncio.Future, proc: Child) -> None:
    """Give up on output that a held pipe keeps coming (a background process, a ControlMaster
    waiting on a dead connection): cancel the read and close our ends."""
    reading.cancel()
    proc.close_pipes()
    await asyncio.gather(reading, return_exceptions=True)


async def _both_ended(out: Stream, err: Stream) -> None:
    """The wrapper's end marker came on stdout and on stderr (a task: cancelling it is quiet)."""
    await out.ended.wait()
    await err.ended.wait()


def _launch(targets: list, command: str, options: RunOptions) -> Launch:
    return Launch(targets, command, ssh=options.ssh, connect_timeout=options.connect_timeout,
                  control=options.control, local=options.local, stdin_path=options.stdin_path,
                  gated=gated(options.check_names, options.stdin_path, options.fanout, len(targets)))


async def run_on_hosts(hosts, command: str, *, on_output: OutputCallback | None = None,
                       **options) -> list[HostResult]:
    """Run ``command`` once on every host; HostResults in input order.

    ``on_output(host, stream, line)`` is called live for each line; keyword options are
    RunOptions' (``ssh``, ``fanout``, ``connect_timeout``, ``timeout``, ``outdir``...).
    """
    return await HostRunner(hosts, command, RunOptions(**options), on_output=on_output).run()
