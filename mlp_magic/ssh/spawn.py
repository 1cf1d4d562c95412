"""Start each host's process (ssh with the remote wrapper, or ``sh`` for this machine), fast.

``Launch`` starts them, possibly ahead of the event loop: the allrun command starts them all
before asyncio is imported, so the handshakes overlap the rest of its start-up; the runner then
follows them on its loop. ``spawn`` is ``os.posix_spawn`` in a session of its own with pipes on
0-2, not subprocess: the command starts its ssh processes before anything imports subprocess
(some 4 ms of imports, paid again by every host's handshake on a busy machine). Where
posix_spawn cannot do all that allrun needs, ``subprocess.Popen`` (the same interface) is used.
"""
from __future__ import annotations

import _thread
import errno
import os
import resource
import signal
import sys
import time

from mlp_magic import config
from mlp_magic.core.host_command import (caller_folder, host_variables, script_arguments, shell_argv,
                                         without_rank_variables)
from mlp_magic.errors import MlpMagicError
from mlp_magic.ssh.argv import (ENDED, GO_WRAPPER, NO_REUSE, STARTED, WRAPPER, as_targets, control_dir,
                                destination, find_program, remote_command, ssh_options)


class Spawned:
    """A child started by ``spawn``: its pid, its pipes (unbuffered binary files; ``stdin`` None
    unless it is a pipe) and, once it was reaped, its exit status (as subprocess reports it)."""

    __slots__ = ("pid", "stdin", "stdout", "stderr", "returncode")

    def __init__(self, pid: int, stdin, stdout, stderr):
        self.pid, self.stdin, self.stdout, self.stderr = pid, stdin, stdout, stderr
        self.returncode: int | None = None

    def wait(self) -> int:
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:   # reaped elsewhere: its status is lost
                self.returncode = 255
        return self.returncode


# Whether posix_spawn can start a child as allrun needs (spawn() finds out for good at its first
# failure): with a session of its own, and only descriptors 0-2 (they are found in /proc).
posix_spawn_usable = hasattr(os, "posix_spawn") and os.path.isdir("/proc/self/fd")


def spawn(argv: list, stdin_path: str | None = None, stdin_pipe: bool = False,
          inherited: list | None = None, env=None):
    """Start ``argv`` in a session of its own (a terminal's Ctrl-C reaches us, not it) with
    stdout and stderr on pipes, stdin from ``stdin_path``, a pipe, or /dev/null; a Spawned (or,
    where posix_spawn cannot do all that, a subprocess.Popen: the same interface).

    posix_spawn, not subprocess: the CLI starts its ssh processes before anything imports
    subprocess (some 4 ms of imports, paid again by every host's handshake on a busy machine).
    As with subprocess, the child gets a session of its own, SIGPIPE (which Python ignores) back
    at its default, and descriptors 0-2 only: the others that it would inherit are listed just
    before the start and closed in the child. One that another thread makes inheritable in
    between would leak (subprocess has no such window); ssh closes any it inherits itself.
    ``inherited``: that list, made once for many starts in a row (``inheritable_descriptors``):
    listing them for each start costs time in proportion to the pipes already open, which made
    the starts of 2,000 hosts quadratic (7 s). ``env``: the child's environment (ours if None)."""
    global posix_spawn_usable
    if posix_spawn_usable:
        try:
            return _posix_spawn(argv, stdin_path, stdin_pipe, inherited, env)
        except NotImplementedError:   # a libc without POSIX_SPAWN_SETSID, or /proc went away
            posix_spawn_usable = False
    return _popen(argv, stdin_path, stdin_pipe, env)


def _popen(argv: list, stdin_path: str | None, stdin_pipe: bool, env=None):
    import subprocess

    stdin = open(stdin_path, "rb") if stdin_path else subprocess.PIPE if stdin_pipe else subprocess.DEVNULL
    try:
        return subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                bufsize=0, start_new_session=True, env=env)
    finally:
        if stdin_path:
            stdin.close()   # the child has its own copy


def _posix_spawn(argv: list, stdin_path: str | None, stdin_pipe: bool, inherited: list | None,
                 env=None) -> Spawned:
    program = find_program(argv[0])
    if program is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
    ours, theirs = [], []   # our ends of the pipes; the child's, closed here once it started
    try:
        if stdin_pipe:
            child_in, parent_in = _pipe(theirs, ours)
        else:
            theirs.append(os.open(stdin_path or os.devnull, os.O_RDONLY | os.O_CLOEXEC))
            theirs[-1] = child_in = _above_stdio(theirs[-1])
        out_read, out_write = _pipe(ours, theirs)
        err_read, err_write = _pipe(ours, theirs)
        stdio = (child_in, out_write, err_write)
        placed = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(stdio)]
        inherited = inheritable_descriptors() if inherited is None else inherited
        closed = [(os.POSIX_SPAWN_CLOSE, fd) for fd in inherited]
        pid = os.posix_spawn(program, argv, os.environ if env is None else env,
                             file_actions=placed + closed, setsid=True,
                             setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    stdin = open(parent_in, "wb", buffering=0) if stdin_pipe else None
    return Spawned(pid, stdin, open(out_read, "rb", buffering=0), open(err_read, "rb", buffering=0))


def inheritable_descriptors() -> list[int]:
    """Our descriptors above 2 that a child would inherit. Python makes the ones it opens
    close-on-exec, but not the ones this process inherited itself (from a shell, a notebook
    server), nor any a library marked inheritable. (Raises NotImplementedError without /proc.)"""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:   # /proc went away since the start: spawn() falls back to subprocess
        raise NotImplementedError("no /proc/self/fd") from None
    found = []
    for fd in map(int, names):
        try:
            if fd > 2 and os.get_inheritable(fd):
                found.append(fd)
        except OSError:
            pass   # the listing's own descriptor, closed by now
    return found


def _pipe(read_side: list, write_side: list) -> tuple[int, int]:
    """A pipe (read end, write end), both close-on-exec and numbered above 2, each end recorded
    at once in its side's list (to be closed by the caller whatever happens next)."""
    read_end, write_end = os.pipe()
    read_side.append(read_end)
    write_side.append(write_end)
    read_side[-1] = read_end = _above_stdio(read_end)
    write_side[-1] = write_end = _above_stdio(write_end)
    return read_end, write_end


def _above_stdio(fd: int) -> int:
    """``fd`` itself or, where our own stdin, stdout or stderr is closed and ``fd`` took its
    number, a close-on-exec copy numbered 3 or more (``fd`` is closed). Placing the child's
    ends on 0, 1 and 2 in turn must not overwrite one that is still to be placed."""
    if fd > 2:
        return fd
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)   # on failure ``fd`` stays, for the caller
    os.close(fd)
    return moved


def raise_nofile_limit(needed: int) -> None:
    """Lift the soft RLIMIT_NOFILE toward the hard limit when the fanout needs more descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass  # keep going; the semaphore still bounds what we open


def signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------------- one process per host


def gated(check_names: bool, stdin_path: str | None, fanout: int, count: int) -> bool:
    """Whether host names are checked alongside the handshakes (each "go" then also waits for
    the verdict), not before them: only when every host starts at once and stdin is free to
    carry the "go"."""
    return check_names and not stdin_path and fanout >= count


class Launch:
    """Starts each host's process (ssh with the wrapper, or ``sh`` for the local machine) with
    ``spawn``; ``start_all`` may run before any event loop exists. Each runs the command by
    allrun's one rule (core/host_command): in our working folder where it exists, with our
    forwarded variables and the host's place in ``targets``."""

    def __init__(self, targets: list, command: str, *, ssh=("ssh",), connect_timeout: float = 10.0,
                 control: str | None = None, local: bool | None = None, gated: bool = False,
                 stdin_path: str | None = None):
        if not isinstance(command, str) or not command.strip():
            raise MlpMagicError("no command to run")
        if not connect_timeout > 0:
            raise MlpMagicError(f"connect timeout must be positive, got {connect_timeout!r}")
        self.targets = as_targets(targets)
        self.command = command
        self.local = (len(self.targets) == 1 and self.targets[0].is_local) if local is None else local
        self.ssh = [] if self.local else config.ssh_command(ssh)
        if self.ssh and find_program(self.ssh[0]) is None:
            raise MlpMagicError(f"--ssh: cannot find the command {self.ssh[0]!r}")
        self.control = None if self.local or control == NO_REUSE else control_dir(control)
        self.connect_timeout = connect_timeout
        self.gated = gated and not self.local   # host names checked while ssh connects
        self.stdin_path = stdin_path
        self.waits_for_go = not self.local and not stdin_path
        self.token = os.urandom(8).hex()
        self.folder = caller_folder(os.getcwd)
        self.started: dict = {}     # index -> process started ahead, not yet taken by the runner
        self.started_at: dict = {}  # index -> monotonic time its process started
        self._lock = _thread.allocate_lock()   # the runner takes processes from another thread
        self._closed = False

    def marker(self, index: int) -> bytes | None:
        """How host ``index``'s start marker begins (None: no wrapper, this machine)."""
        return None if self.local else f"{STARTED}{self.token}{index}_".encode()

    def end_marker(self, index: int) -> bytes | None:
        """How the marker of its command's end begins (None: no wrapper, this machine)."""
        return None if self.local else f"{ENDED}{self.token}{index}_".encode()

    def argv(self, index: int) -> list[str]:
        variables = host_variables(os.environ, self.targets[index].name, index, len(self.targets),
                                   sys.executable)
        if self.local:
            return shell_argv(self.folder, self.command, variables)
        wrapper = GO_WRAPPER if self.waits_for_go else WRAPPER
        remote = remote_command(wrapper, "mlp_allrun", f"{self.token}{index}",
                                *script_arguments(self.folder, self.command, variables))
        return [*self.ssh, *ssh_options(self.connect_timeout, self.control),
                *destination(self.targets[index]), remote]

    def start_all(self) -> None:
        """Start every host now (the caller runs them all at once: fanout >= hosts)."""
        raise_nofile_limit(8 * len(self.targets) + 256)
        try:
            # listed once: the pipes opened meanwhile are ours, close-on-exec
            inherited = inheritable_descriptors() if posix_spawn_usable else None
        except NotImplementedError:
            inherited = None
        try:
            for index in range(len(self.targets)):
                process = self._spawn(index, inherited)
                with self._lock:
                    self.started[index] = process
        except BaseException:
            self.stop_unclaimed()   # all or none
            raise

    def start(self, index: int):
        """Host ``index``'s process: the one started ahead, else a new one (never after
        ``stop_unclaimed``: the run was abandoned)."""
        with self._lock:
            process = self.started.pop(index, None)
            if process is None and self._closed:
                raise MlpMagicError(f"{self.targets[index].name}: not started, the run was stopped")
        if process is None:
            process = self._spawn(index)
        return process

    def stop_unclaimed(self) -> None:
        """Processes started ahead that no runner took (it failed or was abandoned): stop them;
        start nothing after this."""
        with self._lock:
            self._closed = True
            unclaimed, self.started = list(self.started.values()), {}
        for process in unclaimed:
            signal_group(process.pid, 9)
            process.wait()
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()

    def _spawn(self, index: int, inherited: list | None = None):
        try:
            self.started_at[index] = time.monotonic()
            env = without_rank_variables(os.environ) if self.local else None   # (ssh's session has none)
            return spawn(self.argv(index), self.stdin_path, stdin_pipe=self.waits_for_go, inherited=inherited,
                         env=env)
        except OSError as error:
            if self.stdin_path and error.filename == self.stdin_path:
                raise MlpMagicError(f"cannot read {self.stdin_path!r}: {error.strerror}") from None
            raise MlpMagicError(f"cannot start {(self.ssh or ['sh'])[0]!r}: {error.strerror}") from None
