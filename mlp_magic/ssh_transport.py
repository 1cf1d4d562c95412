"""Run one shell command on many hosts through the system OpenSSH client (asyncio, bounded fanout).

Each host gets one ``ssh`` child process (asyncio subprocess: epoll, no ``select()`` limit),
at most ``fanout`` at a time, with BatchMode, ConnectTimeout, accept-new host keys and a
ControlMaster socket in a private 0700 directory so a second call reuses the connections.

On the remote side the command runs under a small ``sh`` wrapper that
- prints a marker line (``__mlp_allrun_started_<token>_<pid>__``) on stderr first: it is removed
  from the output, tells "ssh could not connect" (exit 255, no marker: unreachable) apart from
  a command that itself exited 255, and names the remote process group (sshd makes the
  command a session leader, and the wrapper only ``exec``s), so that a timed-out or
  interrupted command is really killed, whole group, through a second ssh: closing an ssh
  channel does not stop a remote process that has no terminal;
- when the host-name check still runs (see _Gate), waits for a "go" line on stdin first;
- runs the command with bash (sh where there is no bash).
The local machine (the embedded default) is run with a local subprocess, no ssh.

Host statuses: ok, failed (non-zero exit), timeout, unreachable, interrupted.
"""
from __future__ import annotations

import asyncio
import math
import os
import re
import resource
import shlex
import stat
import time
from typing import Callable

from .errors import MlpMagicError
from .results import FAILED, INTERRUPTED, OK, TIMEOUT, UNREACHABLE, HostResult

CONTROL_DIR_ENV = "MLP_MAGIC_SSH_CONTROL_DIR"
LOCAL_NAMES = ("localhost", "127.0.0.1")
DEFAULT_MAX_BYTES = 8 << 20       # output kept in memory per stream per host (--outdir keeps all)
KILL_GRACE = 2.0                  # seconds between TERM and KILL of a remote process group
CONNECT_GRACE = 2.0               # beyond ConnectTimeout, for authentication and session start
VERIFY_AFTER = 1.0                # a host neither connected nor failed by then: check its name
_UNRESOLVED = re.compile(r"[Cc]ould not resolve hostname")
_CHUNK = 65536
_UNIX_PATH_MAX = 104              # sun_path, less ssh's own temporary suffix margin below
# A host name or IP literal, an optional user; nothing a shell would interpret.
_SAFE_HOST = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?$|^\[?[0-9A-Fa-f:.]+\]?$")
_SAFE_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")

OutputCallback = Callable[[str, str, str], None]   # (host, "stdout"|"stderr", line)

# Runs as the remote login shell's command, exec'd, so $$ stays the session leader's pid (its
# process group). $1 = token, $2 = the user's command. Only execs: no process is added.
_WRAPPER = (
    'echo "__mlp_allrun_started_$1_$$__" >&2; '
    'if command -v bash >/dev/null 2>&1; then exec bash -c "$2"; fi; exec sh -c "$2"'
)
# The same, but the command waits for a "go" line on stdin (the host-name check runs meanwhile);
# end of input instead means "abort": nothing runs.
_GATED_WRAPPER = _WRAPPER.replace('>&2; ', '>&2; IFS= read -r go && [ "$go" = go ] || exit 0; ', 1)
# Signals a remote process group. $1 = its id, $2 = TERM or KILL.
_KILLER = 'kill -0 -"$1" 2>/dev/null || exit 0; kill -"$2" -"$1" 2>/dev/null; exit 0'


# ------------------------------------------------------------------------- host names


class Target:
    """One host to reach: its display name, and how ssh addresses it."""

    __slots__ = ("name", "user", "port")

    def __init__(self, name: str, user: str | None = None, port: int | None = None):
        self.name, self.user, self.port = name, user, port

    @property
    def is_local(self) -> bool:
        return self.name in LOCAL_NAMES and self.port is None and self.user is None


def as_target(host) -> Target:
    """A host name (``[user@]name``) or an object with ``.name`` (``.user``, ``.port``) -> Target,
    refusing anything a shell would interpret."""
    if isinstance(host, str):
        user, _, name = host.rpartition("@") if "@" in host else (None, "", host)
        port = None
    else:
        name = getattr(host, "name", None)
        user, port = getattr(host, "user", None), getattr(host, "port", None)
    if not isinstance(name, str) or not _SAFE_HOST.match(name):
        raise MlpMagicError(f"invalid host name {name!r}: letters, digits, '.', '-', '_' only")
    if user is not None and not _SAFE_USER.match(user):
        raise MlpMagicError(f"invalid user name {user!r} for host {name!r}")
    if port is not None and not (isinstance(port, int) and 0 < port < 65536):
        raise MlpMagicError(f"invalid ssh port {port!r} for host {name!r}")
    return Target(name, user, port)


def as_targets(hosts) -> list[Target]:
    targets = [as_target(h) for h in hosts]
    if not targets:
        raise MlpMagicError("no hosts to run on (the host list is empty)")
    seen: set[str] = set()
    for target in targets:
        if target.name in seen:
            raise MlpMagicError(f"host {target.name!r} is listed twice")
        seen.add(target.name)
    return targets


def find_program(name: str) -> str | None:
    """``shutil.which`` without importing shutil (allrun's start-up time counts)."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) and not os.path.isdir(name) else None
    for folder in os.get_exec_path():
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    return None


def ssh_argv(ssh) -> list[str]:
    """``--ssh`` as given (a string or a sequence) -> argv list."""
    if isinstance(ssh, str):
        try:
            argv = shlex.split(ssh)
        except ValueError as err:
            raise MlpMagicError(f"--ssh: cannot split {ssh!r}: {err}") from None
    else:
        argv = [str(a) for a in ssh]
    if not argv:
        raise MlpMagicError("--ssh: empty ssh command")
    return argv


# ------------------------------------------------------------------------- control dir


def control_dir(path: str | None = None) -> str:
    """The private directory of ControlMaster sockets: made 0700, refused when not ours."""
    path = path or os.environ.get(CONTROL_DIR_ENV) or os.path.join(
        os.environ.get("TMPDIR") or "/tmp", f"mlp_magic-ssh-{os.getuid()}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as err:
        raise MlpMagicError(f"ssh control directory {path!r}: {err.strerror}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise MlpMagicError(f"ssh control directory {path!r} is not a directory owned by you")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def _ssh_options(connect_timeout: float, control: str | None) -> list[str]:
    options = [
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={max(1, math.ceil(connect_timeout))}",
        "-o", "StrictHostKeyChecking=accept-new",
        # A persisted master whose host went away must not hang later calls forever.
        "-o", f"ServerAliveInterval={max(1, math.ceil(connect_timeout / 3))}",
        "-o", "ServerAliveCountMax=3",
        "-T",
    ]
    if control and len(control) + 42 + 20 < _UNIX_PATH_MAX:
        options += ["-o", "ControlMaster=auto", "-o", "ControlPersist=60",
                    "-o", f"ControlPath={control}/%C"]
    else:  # no room for a socket path: connect without reuse
        options += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
    return options


def _remote_command(script: str, *args: str) -> str:
    """What ssh hands the remote login shell: ``exec sh -c SCRIPT ARGS...``, every word quoted."""
    return "exec sh -c " + " ".join(shlex.quote(word) for word in (script, *args))


def _destination(target: Target) -> list[str]:
    args = ["-p", str(target.port)] if target.port else []
    args += ["-l", target.user] if target.user else []
    return args + ["--", target.name]


def raise_nofile_limit(needed: int) -> None:
    """Lift the soft RLIMIT_NOFILE toward the hard limit when the fanout needs more descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass  # keep going; the semaphore still bounds what we open


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
                 check_names: bool = False):
        if not isinstance(command, str) or not command.strip():
            raise MlpMagicError("no command to run")
        if not isinstance(fanout, int) or fanout < 1:
            raise MlpMagicError(f"fanout must be a positive integer, got {fanout!r}")
        if not connect_timeout > 0:
            raise MlpMagicError(f"connect timeout must be positive, got {connect_timeout!r}")
        if timeout is not None and not timeout > 0:
            raise MlpMagicError(f"timeout must be positive, got {timeout!r}")
        self.targets = as_targets(hosts)
        self.command = command
        self.local = (len(self.targets) == 1 and self.targets[0].is_local) if local is None else local
        self.ssh = [] if self.local else ssh_argv(ssh)
        self.fanout, self.connect_timeout, self.timeout = fanout, connect_timeout, timeout
        self.on_output, self.outdir, self.max_bytes = on_output, outdir, max_bytes
        self.stdin_path = stdin_path
        if self.ssh and find_program(self.ssh[0]) is None:
            raise MlpMagicError(f"--ssh: cannot find the command {self.ssh[0]!r}")
        self.control = None if self.local else control_dir(control)
        self.check_names = check_names and not self.local
        self.token = os.urandom(8).hex()
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
        if self.check_names:
            if self.stdin_path or self.fanout < len(self.targets):
                # stdin carries a file, or hosts wait for fanout slots: check first, then run
                await check_names(self.targets, self.ssh, self.connect_timeout)
            else:
                self._gate = _Gate(self)   # connect meanwhile; commands wait for the verdict
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
            if self._stop.is_set():
                return  # stays "interrupted", never started
            start = time.monotonic()
            out = self._stream(target.name, "stdout", None)
            err = self._stream(target.name, "stderr", self._marker(index))
            status, code = INTERRUPTED, None
            try:
                status, code = await self._execute(index, f"{self.token}{index}", out, err)
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

    def _marker(self, index: int) -> bytes | None:
        return None if self.local else f"__mlp_allrun_started_{self.token}{index}_".encode()

    def _stream(self, host: str, name: str, marker: bytes | None) -> _Stream:
        path = os.path.join(self.outdir, f"{host}.{name}") if self.outdir else None
        return _Stream(host, name, self.on_output, self.max_bytes, path, marker)

    async def _execute(self, index: int, token: str, out: _Stream, err: _Stream) -> tuple[str, int | None]:
        target = self.targets[index]
        proc = await self._spawn(target, token)
        spawned = time.monotonic()
        drained = asyncio.ensure_future(self._drain(proc, out, err))
        stopper = asyncio.ensure_future(self._stop.wait())
        started = asyncio.ensure_future(err.started.wait())
        try:
            status = None
            if self._gate is not None:
                status = await self._pass_gate(index, proc, err, drained, started, stopper)
            if status is None:
                status = await self._watch(drained, stopper, started, spawned)
        except asyncio.CancelledError:
            await self._kill(target, proc, err, drained)
            raise
        finally:
            stopper.cancel()
            started.cancel()
        if status is None:
            code = drained.result()
            return (OK if code == 0 else FAILED), code
        await self._kill(target, proc, err, drained)
        return status, (255 if status == UNREACHABLE else None)

    async def _pass_gate(self, index: int, proc, err: _Stream, drained, started, stopper) -> str | None:
        """Report this host to the gate, wait for its verdict, then say "go" (None) or close stdin
        so the remote wrapper exits without running anything (INTERRUPTED)."""
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
        passed = gate.refusal() is None
        try:
            if passed:
                proc.stdin.write(b"go\n")
                await proc.stdin.drain()
            proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # ssh already exited (e.g. unreachable): its result says so
        return None if passed else INTERRUPTED

    async def _watch(self, drained, stopper, started, spawned: float) -> str | None:
        """Wait for the command's end (None), an interrupt, the command timeout, or, while the
        remote wrapper has not started, the connect deadline: a reused ssh connection to a host
        that vanished would otherwise hang past ConnectTimeout."""
        now = time.monotonic()
        command_deadline = now + self.timeout if self.timeout else None
        connect_deadline = None if self.local else spawned + self.connect_timeout + CONNECT_GRACE
        while True:
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

    async def _spawn(self, target: Target, token: str) -> asyncio.subprocess.Process:
        if self.stdin_path:
            stdin = open(self.stdin_path, "rb")
        else:
            stdin = asyncio.subprocess.PIPE if self._gate is not None else asyncio.subprocess.DEVNULL
        try:
            if self.local:
                argv = ["sh", "-c", 'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; '
                                    'else exec sh -c "$1"; fi', "mlp_allrun", self.command]
            else:
                wrapper = _GATED_WRAPPER if self._gate is not None else _WRAPPER
                remote = _remote_command(wrapper, "mlp_allrun", token, self.command)
                argv = [*self.ssh, *_ssh_options(self.connect_timeout, self.control),
                        *_destination(target), remote]
            return await asyncio.create_subprocess_exec(
                *argv, stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # a terminal's Ctrl-C reaches us, not the children
            )
        except OSError as error:
            raise MlpMagicError(f"cannot start {(self.ssh or ['sh'])[0]!r}: {error.strerror}") from None
        finally:
            if self.stdin_path:
                stdin.close()  # the child has its own copy

    @staticmethod
    async def _drain(proc, out: _Stream, err: _Stream) -> int:
        await asyncio.gather(_pump(proc.stdout, out), _pump(proc.stderr, err))
        return await proc.wait()

    async def _kill(self, target: Target, proc, err: _Stream, drained: asyncio.Future) -> None:
        """Stop a host's command for real (TERM, then KILL after a grace period), keeping the
        output it had printed. Done means the channel closed: the remote group has exited."""
        for sig in (15, 9):
            if self.local:
                _signal_group(proc.pid, sig)
            elif err.saw_marker:  # the remote command started: signal its process group over ssh
                await self._signal_remote(target, err.remote_pid, "TERM" if sig == 15 else "KILL")
            else:
                break  # still connecting: nothing runs remotely yet
            await _wait_bounded(drained, KILL_GRACE)
            if drained.done():
                return
        # Stop the local client. Its pipes may be held by a ControlMaster still waiting on a dead
        # connection, so stop reading them after a moment instead of waiting for their end.
        if proc.returncode is None:
            proc.kill()
        await _wait_bounded(drained, 0.5)
        if not drained.done():
            drained.cancel()
            transport = getattr(proc, "_transport", None)
            if transport is not None:
                transport.close()
            await asyncio.gather(drained, return_exceptions=True)

    async def _signal_remote(self, target: Target, pid: int, signal_name: str) -> None:
        remote = _remote_command(_KILLER, "mlp_allrun_kill", str(pid), signal_name)
        argv = [*self.ssh, *_ssh_options(min(self.connect_timeout, 5.0), self.control),
                *_destination(target), remote]
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

    A host is good once its ssh connected (the wrapper's marker arrived) or failed for another
    reason than name resolution. Hosts still undecided after VERIFY_AFTER seconds (a host that
    does not answer, a silent failure) are checked with ``ssh -G`` and the resolver.
    """

    def __init__(self, runner: "HostRunner"):
        self.runner = runner
        self.pending = set(range(len(runner.targets)))
        self.opened = asyncio.get_running_loop().create_future()
        self._verifier = asyncio.ensure_future(self._verify_later())

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


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
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
        *ssh, "-G", *_destination(target), stdin=asyncio.subprocess.DEVNULL,
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


def copy_command(src: str, dest: str) -> str:
    """The remote shell command that stores stdin as ``dest`` (into it when it is a directory),
    atomically, with ``src``'s permission bits."""
    mode = format(stat.S_IMODE(os.stat(src).st_mode), "o")
    name = os.path.basename(src)
    return (
        f'd={shlex.quote(dest)}; if [ -d "$d" ]; then d="${{d%/}}/"{shlex.quote(name)}; fi; '
        'mkdir -p "$(dirname "$d")" && t="$d.mlp_part.$$" && cat >"$t" && '
        f'chmod {mode} "$t" && mv -f "$t" "$d"'
    )


def check_copy_source(src: str) -> None:
    if not os.path.exists(src):
        raise MlpMagicError(f"--copy: no such file {src!r}")
    if not os.path.isfile(src):
        raise MlpMagicError(f"--copy: {src!r} is not a regular file (tar a directory first)")
    if not os.access(src, os.R_OK):
        raise MlpMagicError(f"--copy: cannot read {src!r}")


async def copy_to_hosts(hosts, src: str, dest: str | None = None, **options) -> list[HostResult]:
    """Put the local file ``src`` at ``dest`` (default: the same absolute path) on every host,
    streaming it through each host's ssh connection: no shared filesystem assumed."""
    check_copy_source(src)
    dest = dest or os.path.abspath(src)
    runner = HostRunner(hosts, copy_command(src, dest), stdin_path=src, **options)
    return await runner.run()
