"""Which address OpenSSH will look up for a host name, read from its configuration (pure logic).

allrun runs nothing anywhere until every host name is known good. A name that maps, through the
ssh configuration, to an IP literal or to a name the local resolver knows can be cleared at
once, before its handshake ends, so the hosts' commands need not wait for the slowest host.

Only a conservative subset is read: ``Host`` blocks (``*``, ``?``, ``!`` patterns), ``Include``,
``HostName`` (``%h`` and ``%%``), and the options that move resolution elsewhere. Whatever would
need ssh itself to decide (``Match``, ``ProxyCommand``/``ProxyJump``, host name
canonicalization, another ``%`` token, a client that is not OpenSSH's ``ssh``) gives None:
"cannot tell", and the name waits for its connection as before. A wrong answer here could only
clear a name early, never refuse one: refusals still come from ssh's own failure.

No I/O: files are read through the ``read`` and ``glob`` callables the caller passes. ``ssh -G``
(ssh's own answer, a process) is the one exception: ``read_ssh_G`` runs it, ``parse_ssh_G``
reads what it prints, for every caller.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable

USER_DIR = "~/.ssh"
SYSTEM_DIR = "/etc/ssh"
SYSTEM_CONFIG = "/etc/ssh/ssh_config"
USER_CONFIG = "~/.ssh/config"
MAX_INCLUDE_DEPTH = 16            # OpenSSH's own limit
# ssh's options that take an argument (its getopt string), so a value is never taken for a flag
_WITH_ARGUMENT = set("bceilmopBDEFIJLOPQRSwW")
# A host that is resolved somewhere else than here, or a name that ssh rewrites before resolving
_RESOLVED_ELSEWHERE = {"proxycommand", "proxyjump"}
_WANTED = {"hostname", "canonicalizehostname", *_RESOLVED_ELSEWHERE}


class CannotTell(Exception):
    """Only ssh itself could say (a Match block, an include too deep, ...)."""


def config_sources(ssh: list[str]) -> tuple[list[tuple[str, bool]], list[str]] | None:
    """For an ssh argv: (the config files in the order ssh reads them, each with whether it is
    a user's file (its relative Includes are under ~/.ssh), and the ``Key value`` lines of its
    ``-o`` options), or None when this is not OpenSSH's client with options read here."""
    if not ssh or os.path.basename(ssh[0]) != "ssh":
        return None
    files: list[tuple[str, bool]] | None = None
    options: list[str] = []
    args = iter(ssh[1:])
    for arg in args:
        if not arg.startswith("-") or arg == "-":
            return None        # a host or command in the ssh command itself
        flag, value = arg[1:2], arg[2:]
        if flag in _WITH_ARGUMENT and not value:
            value = next(args, None)
            if value is None:
                return None
        if flag in ("J", "W"):
            return None        # a jump host resolves the name
        if flag == "F":
            files = [] if value == "none" else [(value, True)]
        elif flag == "o":
            options.append(value)
        elif flag not in _WITH_ARGUMENT and not set(arg[1:]) <= set("1246afgknqstvxACGKMNTVXYy"):
            return None        # an option unknown here
    return ([(USER_CONFIG, True), (SYSTEM_CONFIG, False)] if files is None else files), options


def hostname_for(name: str, files: list[tuple[str, bool]], options: Iterable[str] = (), *,
                 read: Callable[[str], str | None], glob: Callable[[str], list[str]],
                 home: str = "~") -> str | None:
    """The name or address ssh will resolve to reach ``name``, or None when only ssh can tell.

    ``read(path)``: a file's text, None when it does not exist; ``glob(pattern)``: the sorted
    paths matching an Include pattern; ``home``: what ``~`` stands for.
    """
    found: dict[str, str] = {}
    reader = _Reader(name, found, read, glob, home)   # Host patterns see the name as typed
    try:
        for line in options:
            reader.line(line, active=True, user=True, depth=0)
        for path, user in files:
            reader.file(path, user, depth=0)
    except CannotTell:
        return None
    if any(found.get(key, "none").lower() != "none" for key in _RESOLVED_ELSEWHERE):
        return None
    if found.get("canonicalizehostname", "no").lower() not in ("no", "none"):
        return None
    host = name.lower()   # what %h and the default HostName are
    return _expand_tokens(found.get("hostname", host), host)


class _Reader:
    """Walks configuration lines the way ssh does: the first value of each option wins."""

    def __init__(self, host: str, found: dict, read, glob, home: str):
        self.host, self.found = host, found
        self.read, self.glob, self.home = read, glob, home

    def file(self, path: str, user: bool, depth: int) -> None:
        text = self.read(self._expand_home(path))
        if text is None:
            return
        active = True   # lines before the first Host block apply to every host
        for line in text.splitlines():
            active = self.line(line, active, user, depth)

    def line(self, line: str, active: bool, user: bool, depth: int) -> bool:
        """Take one line; returns whether the following lines apply to this host."""
        words = _words(line)
        if not words:
            return active
        keyword, args = words[0].lower(), words[1:]
        if keyword == "host":
            return _host_matches(args, self.host)
        if keyword == "match":
            raise CannotTell("Match block")
        if not active:
            return active
        if keyword == "include":
            self._include(args, user, depth)
        elif keyword in _WANTED and args and keyword not in self.found:
            self.found[keyword] = args[0]
        return active

    def _include(self, patterns: list[str], user: bool, depth: int) -> None:
        if depth + 1 > MAX_INCLUDE_DEPTH:
            raise CannotTell("Include nested too deep")
        for pattern in patterns:
            pattern = self._expand_home(pattern)
            if not os.path.isabs(pattern):
                pattern = os.path.join(self._expand_home(USER_DIR) if user else SYSTEM_DIR, pattern)
            for path in self.glob(pattern):
                self.file(path, user, depth + 1)

    def _expand_home(self, path: str) -> str:
        return self.home + path[1:] if path == "~" or path.startswith("~/") else path


def _words(line: str) -> list[str]:
    """A configuration line's words: ``Key value``, ``Key=value``, double-quoted values, comments."""
    line = line.strip()
    if not line or line.startswith("#"):
        return []
    match = re.match(r"([^\s=]+)\s*(?:=\s*|\s+|$)(.*)", line)
    if match is None:
        return []
    words = [match.group(1)]
    for quoted, plain in re.findall(r'"([^"]*)"|(\S+)', match.group(2)):
        if plain.startswith("#"):
            break
        words.append(quoted if quoted or not plain else plain)
    return words


def _host_matches(patterns: list[str], host: str) -> bool:
    """ssh's Host line: any pattern matches and no negated one does (case matters)."""
    matched = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if _glob_match(pattern[1:] if negated else pattern, host):
            if negated:
                return False
            matched = True
    return matched


def _glob_match(pattern: str, host: str) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, host, re.DOTALL) is not None


def _expand_tokens(value: str, host: str) -> str | None:
    """``%h`` and ``%%``; any other token needs ssh's own knowledge: None."""
    out, index = [], 0
    while index < len(value):
        char = value[index]
        if char != "%":
            out.append(char)
            index += 1
            continue
        token = value[index + 1:index + 2]
        if token == "h":
            out.append(host)
        elif token == "%":
            out.append("%")
        else:
            return None
        index += 2
    return "".join(out)


# ------------------------------------------------------------------------- ssh -G


def ssh_G_argv(ssh: list[str], destination: list[str]) -> list[str]:
    """``ssh -G``: print the configuration ssh would use for a host; no connection is made."""
    return [*ssh, "-G", *destination]


def parse_ssh_G(text: str) -> dict[str, str]:
    """``ssh -G`` output -> {lower-case option: value} (the first value of each option)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        found.setdefault(key.lower(), value.strip())
    return found


def read_ssh_G(ssh: list[str], host: str, timeout: float = 10.0) -> dict[str, str] | None:
    """What ssh's configuration says of ``host``; None when ssh -G fails or cannot run."""
    import subprocess

    try:
        done = subprocess.run(ssh_G_argv(ssh, ["--", host]), capture_output=True, text=True,
                              errors="replace", stdin=subprocess.DEVNULL, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_ssh_G(done.stdout) if done.returncode == 0 else None
