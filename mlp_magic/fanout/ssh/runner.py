"""Run one shell command on many hosts through the system OpenSSH client (asyncio, bounded fanout).

Each host gets one ``ssh`` child process (see ``ssh_launch`` for its argv and remote wrapper), at
most ``fanout`` at a time, with BatchMode, ConnectTimeout, accept-new host keys and a
ControlMaster socket in a private 0700 directory so a second call reuses the connections.
Processes are started by ``ssh_launch`` (possibly before the event loop exists: the CLI starts
them ahead) and followed here: their pipes on the loop (epoll, no ``select()`` limit), their end
through a pidfd (no thread per child).

A remote command whose stdin is free starts only when told "go", and "go" is written only once
its marker (naming its process group) has arrived: a host given up before that (interrupt,
timeout, connect deadline) gets its ssh killed, and the wrapper, if it started at all, reads the
end of its input and runs nothing. No command can run unseen, nor be left running.

Host statuses: ok, failed (non-zero exit), timeout, unreachable, interrupted.
"""
from __future__ import annotations

import asyncio
import os
import re
import time
from typing import Callable

from .errors import MlpMagicError
from .results import FAILED, INTERRUPTED, OK, TIMEOUT, UNREACHABLE, HostResult
from .ssh_launch import (KILLER, Launch, Target, as_targets, check_copy_source, copy_command, destination,
                         find_program, gated, raise_nofile_limit, remote_command, signal_group, ssh_argv,
                         ssh_options)

DEFAULT_MAX_BYTES = 8 << 20       # output kept in memory per stream per host (--outdir keeps all)
KILL_GRACE = 2.0                  # seconds between TERM and KILL of a remote process group
CONNECT_GRACE = 2.0               # beyond ConnectTimeout, for authentication and session start
VERIFY_AFTER = 1.0                # a host neither connected nor failed by then: check its name
_UNRESOLVED = re.compile(r"[Cc]ould not resolve hostname")
_CHUNK = 65536

OutputCallback = Callable[[str, str, str], None]   # (host, "stdout"|"stderr", line)

# ------------------------------------------------------------------------- output capture


class _Stream:
    """One host's stdout or stderr: live lines out, a capped copy in memory, all to a file."""

    def __init__(self, host: str, name: str, on_output, max_bytes: int, path: str | None,
                 marker: bytes | None = None):
        self.host, self.name, self.on_output = host, name, on_output
        self.max_bytes, self.marker = max_bytes, marker
        self.kept = bytearray()   # one buffer, not an object per line (floods are many lines)
        self.dropped = 0
        self.partial = b""
        self.saw_marker = False
        self.remote_pid: int | None = None   # the remote command's process group
        self.started = asyncio.Event()  # set when the marker arrives: the remote command runs
        self.file = open(path, "wb") if path else None

    def feed(self, data: bytes) -> None:
        if self.on_output is None and (self.marker is None or self.saw_marker):
            # Nothing needs lines (no live display, no marker to find): keep the bytes as
            # they come, so a flood costs no per-line work.
            if self.partial:
                data, self.partial = self.partial + data, b""
            self._keep(data)
            return
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            self._line(line, b"\n")

    def close(self) -> None:
        if self.partial:
            self._line(self.partial, b"")
            self.partial = b""
        if self.file:
            self.file.close()
            self.file = None

    def text(self) -> str:
        out = self.kept.decode("utf-8", errors="replace")
        if self.dropped:
            out += f"\n[mlp_magic: {self.dropped} more bytes not kept in memory]\n"
        return out

    def _line(self, line: bytes, end: bytes) -> None:
        if self.marker is not None and not self.saw_marker and line.startswith(self.marker):
            pid = line[len(self.marker):-2]
            if line.endswith(b"__") and pid.isdigit():
                self.saw_marker, self.remote_pid = True, int(pid)
                self.started.set()
                return
        self._keep(line + end)
        if self.on_output is not None:
            self.on_output(self.host, self.name, line.decode("utf-8", errors="replace"))

    def _keep(self, data: bytes) -> None:
        if self.file:
            self.file.write(data)
        room = self.max_bytes - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))


async def _pump(reader: asyncio.StreamReader, stream: _Stream) -> None:
    while True:
        data = await reader.read(_CHUNK)
        if not data:
            break
        stream.feed(data)
    stream.close()


# ------------------------------------------------------------------------- a started process


class _Child:
    """A process started by Launch (``ssh_launch.Spawned``), followed on the running loop: its stdout and
    stderr as StreamReaders, its end through a pidfd (no thread per child, unlike asyncio's own
    subprocesses before Python 3.12)."""

    def __init__(self, process):
        self.process, self.pid = process, process.pid
        self.stdout = self.stderr = None
        self.status_lost = False   # reaped by someone else (SIGCHLD ignored, a waitpid(-1) reaper)
        # Whether its remote command runs once the session starts: always, unless its wrapper
        # waits for "go" on stdin (a pipe) and none was written yet.
        self.released = process.stdin is None
        self._transports: list = []

    async def attach(self) -> None:
        self.stdout = await self._reader(self.process.stdout)
        self.stderr = await self._reader(self.process.stderr)

    async def _reader(self, pipe) -> asyncio.StreamReader:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_CHUNK, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport, _ = await loop.connect_read_pipe(lambda: protocol, pipe)
        self._transports.append(transport)
        return reader

    async def wait(self) -> int:
        code = self._reap(os.WNOHANG)
        if code is not None:
            return code
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):   # no pidfd (not Linux, or before 5.3): look now and then
            delay = 0.001
            while (code := self._reap(os.WNOHANG)) is None:
                await asyncio.sleep(delay)
                delay = min(2 * delay, 0.05)
            return code
        loop = asyncio.get_running_loop()
        ended = loop.create_future()
        loop.add_reader(pidfd, lambda: ended.done() or ended.set_result(None))
        try:
            await ended   # readable once the process has ended, reaped or not
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        return self._reap(0)

    def _reap(self, flags: int) -> int | None:
        """The exit status, or None while it runs. A child that someone else reaped is not a
        success (0); it is 255 here, "status lost", as asyncio's own watchers say."""
        if self.process.returncode is not None:
            return self.process.returncode
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:
            self.status_lost = True
            self.process.returncode = 255
            return 255
        if pid == 0:
            return None
        self.process.returncode = os.waitstatus_to_exitcode(status)
        return self.process.returncode

    def end_input(self, data: bytes = b"") -> None:
        """Write ``data`` (a few bytes into an empty pipe: never blocks) and close stdin, if open."""
        stdin = self.process.stdin
        if stdin is None or stdin.closed:
            return
        try:
            if data:
                stdin.write(data)
                self.released = True
        except (BrokenPipeError, ConnectionResetError):
            pass  # ssh already exited (e.g. unreachable): its result says so
        finally:
            stdin.close()

    def kill(self) -> None:
        """SIGKILL to its process group (ssh and, say, a ProxyCommand it started)."""
        if self.process.returncode is None:
            signal_group(self.pid, 9)

    def close_pipes(self) -> None:
        """Stop reading (its pipes may be held open by a ControlMaster it started)."""
        for transport in self._transports:
            transport.close()
        self.end_input()
        self._reap(os.WNOHANG)


# ------------------------------------------------------------------------- the runner


class HostRunner:
    """Run ``command`` on every host; ``results`` (input order) always holds what is known.

    ``await run()`` returns the results. ``interrupt()`` (from the loop's thread) stops every
    unfinished host: its remote process group is killed, what it printed is kept, and its
    status becomes ``interrupted``; ``run()`` then returns normally. Cancelling ``run()`` does
    the same cleanup and re-raises the cancellation.
    """

    def __init__(self, hosts, command: str, *, ssh=("ssh",), fanout: int = 64,
                 connect_timeout: float = 10.0, timeout: float | None = None,
                 on_output: OutputCallback | None = None, control: str | None = None,
                 local: bool | None = None, outdir: str | None = None,
                 stdin_path: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                 check_names: bool = False, launch: Launch | None = None):
        """``launch``: a Launch of these hosts and this command whose processes may already run
        (``Launch.start_all``); its ssh, control, local, stdin and connect-timeout settings apply."""
        if not isinstance(fanout, int) or fanout < 1:
            raise MlpMagicError(f"fanout must be a positive integer, got {fanout!r}")
        if timeout is not None and not timeout > 0:
            raise MlpMagicError(f"timeout must be positive, got {timeout!r}")
        targets = as_targets(hosts)
        if launch is None:
            launch = Launch(targets, command, ssh=ssh, connect_timeout=connect_timeout, control=control,
                            local=local, stdin_path=stdin_path,
                            gated=gated(check_names, stdin_path, fanout, len(targets)))
        elif launch.command != command or [t.name for t in launch.targets] != [t.name for t in targets]:
            raise ValueError("HostRunner: the launch was made for other hosts or another command")
        self.launch = launch
        self.targets, self.command, self.local = launch.targets, command, launch.local
        self.ssh, self.control, self.stdin_path = launch.ssh, launch.control, launch.stdin_path
        self.fanout, self.connect_timeout, self.timeout = fanout, launch.connect_timeout, timeout
        self.on_output, self.outdir, self.max_bytes = on_output, outdir, max_bytes
        self.check_names = check_names and not self.local
        self._gate: _Gate | None = None
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
            self._gate = _Gate(self)   # connect meanwhile; commands wait for the verdict
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
            out = self._stream(target.name, "stdout", None)
            err = self._stream(target.name, "stderr", self.launch.marker(index))
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

    def _stream(self, host: str, name: str, marker: bytes | None) -> _Stream:
        path = os.path.join(self.outdir, f"{host}.{name}") if self.outdir else None
        return _Stream(host, name, self.on_output, self.max_bytes, path, marker)

    async def _execute(self, index: int, out: _Stream, err: _Stream) -> tuple[str, int | None]:
        target = self.targets[index]
        proc = _Child(self.launch.start(index))
        try:
            await proc.attach()
        except BaseException:   # cancelled (or no pipe transport): nothing will follow it
            proc.kill()
            proc.close_pipes()
            await _reap_bounded(proc)
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

    async def _pass_gate(self, index: int, err: _Stream, drained, started, stopper) -> str | None:
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
    async def _drain(proc: _Child, out: _Stream, err: _Stream) -> int:
        await asyncio.gather(_pump(proc.stdout, out), _pump(proc.stderr, err))
        return await proc.wait()

    async def _kill(self, target: Target, proc, err: _Stream, drained: asyncio.Future) -> None:
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
            await _wait_bounded(drained, KILL_GRACE)
            if drained.done():
                return
        # Stop the local client. Its pipes may be held by a ControlMaster still waiting on a dead
        # connection, so stop reading them after a moment instead of waiting for their end.
        proc.kill()
        await _wait_bounded(drained, 0.5)
        if not drained.done():
            drained.cancel()
            proc.close_pipes()
            await asyncio.gather(drained, return_exceptions=True)
            await _reap_bounded(proc)

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


class _Gate:
    """Commands wait for a "go" until every host name is known good, so that a typo in a host
    list runs nothing anywhere, without a look-up process per host in the usual case.

    A host is good once the local resolver knows the name ssh will look up for it (read from the
    ssh configuration, see ``ssh_config``; usually long before its handshake ends), once its ssh
    connected (the wrapper's marker arrived), or once ssh failed for another reason than name
    resolution. Hosts still undecided after VERIFY_AFTER seconds (a host that does not answer, a
    silent failure) are checked with ``ssh -G`` and the resolver.
    """

    def __init__(self, runner: "HostRunner"):
        self.runner = runner
        self.pending = set(range(len(runner.targets)))
        self.opened = asyncio.get_running_loop().create_future()
        self._verifier = asyncio.ensure_future(self._verify_later())
        loop = asyncio.get_running_loop()

        def cleared(indices: list) -> None:   # from the look-up thread
            try:
                loop.call_soon_threadsafe(self._clear, indices)
            except RuntimeError:
                pass   # the run is over
        look_up_names_locally(runner.targets, runner.ssh, cleared)

    def connected(self, index: int) -> None:
        self._clear([index])

    def exited(self, index: int, stderr: str) -> None:
        """ssh ended before the wrapper ran: a name it could not resolve refuses the run."""
        found = _UNRESOLVED.search(stderr)
        if found:
            name = self.runner.targets[index].name
            reason = stderr[found.start():].splitlines()[0].strip()
            self._refuse(MlpMagicError(f"unknown host {name!r}: {reason}"))
        elif stderr.strip():
            self._clear([index])  # refused, timed out, denied...: the name itself resolved

    def refusal(self) -> MlpMagicError | None:
        if self.opened.done() and not self.opened.cancelled():
            return self.opened.exception()
        return None

    def close(self) -> None:
        self._verifier.cancel()
        if not self.opened.done():
            self.opened.cancel()

    def _clear(self, indices) -> None:
        self.pending.difference_update(indices)
        if not self.pending and not self.opened.done():
            self.opened.set_result(True)
            self._verifier.cancel()

    def _refuse(self, error: MlpMagicError) -> None:
        if not self.opened.done():
            self.opened.set_exception(error)
        self._verifier.cancel()

    async def _verify_later(self) -> None:
        await asyncio.sleep(min(VERIFY_AFTER, self.runner.connect_timeout))
        undecided = sorted(self.pending)
        runner = self.runner
        try:
            await check_names([runner.targets[i] for i in undecided], runner.ssh, runner.connect_timeout)
        except MlpMagicError as error:
            self._refuse(error)
        else:
            self._clear(undecided)


async def _reap_bounded(proc: _Child, seconds: float = 1.0) -> None:
    """Reap a child just killed, so that a long-lived kernel keeps no zombie of it."""
    try:
        await asyncio.wait_for(proc.wait(), seconds)
    except asyncio.TimeoutError:
        pass


async def _wait_bounded(future: asyncio.Future, seconds: float) -> None:
    try:
        await asyncio.wait_for(asyncio.shield(future), seconds)
    except asyncio.TimeoutError:
        pass


# ------------------------------------------------------------------------- public functions


async def run_on_hosts(hosts, command: str, *, ssh=("ssh",), fanout: int = 64, connect_timeout: float = 10.0,
                       timeout: float | None = None, on_output: OutputCallback | None = None,
                       **options) -> list[HostResult]:
    """Run ``command`` once on every host; HostResults in input order.

    ``on_output(host, stream, line)`` is called live for each line. Extra keyword options go to
    HostRunner (``control``, ``local``, ``outdir``, ``stdin_path``, ``max_bytes``, ``check_names``).
    """
    runner = HostRunner(hosts, command, ssh=ssh, fanout=fanout, connect_timeout=connect_timeout,
                        timeout=timeout, on_output=on_output, **options)
    return await runner.run()


async def _ssh_config_of(ssh: list[str], target: Target) -> dict:
    """``ssh -G``: the configuration ssh would use for this host (no connection is made)."""
    proc = await asyncio.create_subprocess_exec(
        *ssh, "-G", *destination(target), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise MlpMagicError(f"host {target.name!r}: ssh -G failed: {err.decode(errors='replace').strip()}")
    config = {}
    for line in out.decode(errors="replace").splitlines():
        key, _, value = line.partition(" ")
        config.setdefault(key.lower(), value.strip())
    return config


def _is_address(name: str) -> bool:
    import socket

    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, name.strip("[]"))
            return True
        except OSError:
            pass
    return False


def look_up_names_locally(targets: list, ssh: list[str], report: Callable[[list], None]) -> None:
    """In a daemon thread, ``report(indices)`` the hosts whose name, as the ssh configuration
    maps it, is an address or known to the local resolver (what ssh will do first). Names it
    cannot tell about are left out, never refused: their connection decides."""
    from . import ssh_config

    sources = ssh_config.config_sources(ssh)
    if sources is None:
        return
    files, options = sources

    def look_up() -> None:
        # Each config file is read, and each Include pattern globbed, once for all hosts.
        read, glob = functools.cache(_read_text), functools.cache(_sorted_glob)
        home = os.path.expanduser("~")
        names = {}
        for index, target in enumerate(targets):
            name = ssh_config.hostname_for(target.name, files, options, read=read, glob=glob, home=home)
            if name is not None:
                names[index] = name
        addresses = {index for index, name in names.items() if _is_address(name)}
        if addresses:
            report(sorted(addresses))
        for index, name in names.items():   # the resolver may be slow (DNS): one report each
            if index not in addresses and _resolves(name):
                report([index])

    import functools
    import threading

    # A thread of our own, not the loop's executor: asyncio.run would wait for a slow look-up.

    threading.Thread(target=look_up, name="allrun-names", daemon=True).start()


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _sorted_glob(pattern: str) -> list[str]:
    import glob

    return sorted(glob.glob(pattern))


def _resolves(name: str) -> bool:
    import socket

    try:
        socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    return True


async def _check_name(ssh: list[str], target: Target, timeout: float) -> None:
    config = await _ssh_config_of(ssh, target)
    hostname = config.get("hostname", target.name)
    if _is_address(hostname) or config.get("proxycommand", "none") != "none" \
            or config.get("proxyjump", "none") != "none":
        return  # nothing to resolve here (or a jump host resolves it)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.getaddrinfo(hostname, None), timeout)
    except (OSError, asyncio.TimeoutError) as error:
        why = "no answer" if isinstance(error, asyncio.TimeoutError) else (error.strerror or str(error))
        alias = f" (HostName {hostname!r})" if hostname != target.name else ""
        raise MlpMagicError(f"unknown host {target.name!r}{alias}: cannot resolve it ({why})") from None


async def check_names(targets: list, ssh, timeout: float = 10.0) -> None:
    """Refuse (MlpMagicError) a host name that neither the ssh configuration nor the resolver
    knows; ``ssh -G`` per host (no connection), concurrently."""
    ssh = ssh_argv(ssh)
    if find_program(ssh[0]) is None:
        raise MlpMagicError(f"--ssh: cannot find the command {ssh[0]!r}")
    limit = asyncio.Semaphore(32)

    async def one(target):
        async with limit:
            await _check_name(ssh, target, timeout)
    results = await asyncio.gather(*(one(t) for t in targets), return_exceptions=True)
    for result in results:  # the first bad host in input order
        if isinstance(result, BaseException):
            raise result


async def copy_to_hosts(hosts, src: str, dest: str | None = None, **options) -> list[HostResult]:
    """Put the local file ``src`` at ``dest`` (default: the same absolute path) on every host,
    streaming it through each host's ssh connection: no shared filesystem assumed."""
    check_copy_source(src)
    dest = dest or os.path.abspath(src)
    runner = HostRunner(hosts, copy_command(src, dest), stdin_path=src, **options)
    return await runner.run()
