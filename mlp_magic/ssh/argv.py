"""How allrun reaches one host: its name, the ssh options, and the remote wrapper.

On the remote side the command runs under a small ``sh`` wrapper that
- prints a marker line (``__mlp_allrun_started_<token>_<pid>__``) on stderr first: it is removed
  from the output, tells "ssh could not connect" (exit 255, no marker: unreachable) apart from
  a command that itself exited 255, and names the remote process group (sshd makes the
  command a session leader; the command runs in its group), so that a timed-out or
  interrupted command is really killed, whole group, through a second ssh: closing an ssh
  channel does not stop a remote process that has no terminal;
- when its stdin is free (all but a ``--copy``), waits for a "go" line on stdin first: allrun
  writes it once the marker arrived (and the host names were found good, when that check runs
  alongside), so a host given up before that runs nothing, even if its session starts later;
- then runs the command as ``core/host_command.RUN_SCRIPT`` does: the caller's folder (else
  $HOME), the forwarded and host variables, and the command with bash (sh where there is no
  bash), as every transport does, but as the wrapper's child, not exec'd;
- prints a second marker, on stdout and on stderr, once the command ended
  (``__mlp_allrun_ended_<token>_<status>__``):
  ssh returns only when the channel closes, which a process the command left in the background
  may hold open for hours; allrun gives its output the same grace as on this machine, then
  closes the channel (``ssh/streams``, ``ssh/runner``).
The local machine (the embedded default) runs the same script with a local ``sh``, no ssh.

Pure but for ``control_dir`` (makes the directory), ``find_program`` and ``check_copy_source``
(look at files): no subprocess, no asyncio (the CLI uses this module before either is imported).
"""
from __future__ import annotations

import math
import os
import re
import shlex
import stat

from mlp_magic import config
from mlp_magic.core.host_command import run_script_then
from mlp_magic.core.hostfile import reject_duplicates
from mlp_magic.machine.names import is_this_machine
from mlp_magic.errors import MlpMagicError

_UNIX_PATH_MAX = 104              # sun_path, less ssh's own temporary suffix margin below
# A host name or IP literal, an optional user; nothing a shell would interpret.
_SAFE_HOST = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?$|^\[?[0-9A-Fa-f:.]+\]?$")
_SAFE_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")

# Runs as the remote login shell's command, exec'd, so $$ stays the session leader's pid (its
# process group). $1 = token, then RUN_SCRIPT's arguments (core/host_command.script_arguments).
# A marker that cannot be written (the channel closed: allrun gave up on this host) runs nothing,
# even where SIGPIPE is ignored. The command is the wrapper's child, in its group, and a second
# marker says its end and exit status: a process it left in the background holds the channel
# (ssh waits for it) long after.
STARTED, ENDED = "__mlp_allrun_started_", "__mlp_allrun_ended_"
_END_LINE = f'"{ENDED}${{__mlp_token}}_${{__mlp_status}}__"'
# (on both streams: ssh forwards each on its own, so a stdout still in flight when stderr's
# marker arrived would otherwise be cut short)
WRAPPER = (f'echo "{STARTED}$1_$$__" >&2 || exit 141; __mlp_token=$1; shift; '
           + run_script_then(f'echo {_END_LINE}; echo {_END_LINE} >&2'))
# The same, but the command waits for a "go" line on stdin; end of input instead means "abort":
# nothing runs.
GO_WRAPPER = WRAPPER.replace('exit 141; ', 'exit 141; IFS= read -r go && [ "$go" = go ] || exit 0; ', 1)
# Signals a remote process group. $1 = its id, $2 = TERM or KILL.
KILLER = 'kill -0 -"$1" 2>/dev/null || exit 0; kill -"$2" -"$1" 2>/dev/null; exit 0'


class Target:
    """One host to reach: its display name, and how ssh addresses it."""

    __slots__ = ("name", "user", "port")

    def __init__(self, name: str, user: str | None = None, port: int | None = None):
        self.name, self.user, self.port = name, user, port

    @property
    def is_local(self) -> bool:
        """This machine, named without a user or port: run with a local ``sh``, no ssh."""
        return self.port is None and self.user is None and is_this_machine(self.name)


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
    reject_duplicates(((t.name, i) for i, t in enumerate(targets, 1)), "hosts", units="entries")
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


# As a control directory: connect without a ControlMaster (a one-off call, such as a hang report,
# leaves no connection behind, where allrun's persist 60 s for the next call).
NO_REUSE = "none"


def control_dir(path: str | None = None) -> str:
    """The private directory of ControlMaster sockets: made 0700, refused when not ours."""
    path = path or config.ssh_control_dir()
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


def ssh_options(connect_timeout: float, control: str | None) -> list[str]:
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


def remote_command(script: str, *args: str) -> str:
    """What ssh hands the remote login shell: ``exec sh -c SCRIPT ARGS...``, every word quoted."""
    return "exec sh -c " + " ".join(shlex.quote(word) for word in (script, *args))


def destination(target: Target) -> list[str]:
    args = ["-p", str(target.port)] if target.port else []
    args += ["-l", target.user] if target.user else []
    return args + ["--", target.name]


def copy_command(src: str, dest: str) -> str:
    """The remote shell command that stores stdin as ``dest`` (into it when it is a directory),
    atomically, with ``src``'s permission bits; a transfer cut short (its input ended early: ssh
    was stopped) leaves nothing behind."""
    info = os.stat(src)
    mode = format(stat.S_IMODE(info.st_mode), "o")
    name = os.path.basename(src)
    return (
        f'd={shlex.quote(dest)}; if [ -d "$d" ]; then d="${{d%/}}/"{shlex.quote(name)}; fi; '
        'mkdir -p "$(dirname "$d")" && t="$d.mlp_part.$$" && cat >"$t" && n=$(($(wc -c <"$t"))) && '
        f'if [ "$n" -ne {info.st_size} ]; then rm -f "$t"; '
        f'echo "allrun: copy failed: $n bytes arrived, {info.st_size} expected" >&2; exit 1; fi && '
        f'chmod {mode} "$t" && mv -f "$t" "$d"'
    )


def check_copy_source(src: str) -> None:
    if not os.path.exists(src):
        raise MlpMagicError(f"--copy: no such file {src!r}")
    if not os.path.isfile(src):
        raise MlpMagicError(f"--copy: {src!r} is not a regular file (tar a directory first)")
    if not os.access(src, os.R_OK):
        raise MlpMagicError(f"--copy: cannot read {src!r}")
