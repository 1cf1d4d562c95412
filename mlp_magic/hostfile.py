"""Parsers for every host-list format a job may hand us (pure: text in, HostEntry list out).

Formats (see shared/reference/platform.md section 3):
- OpenMPI / DeepSpeed / Horovod hostfile: ``host slots=N [max_slots=M]``; a bare ``host`` is 1 slot.
- MPICH / Hydra machinefile: ``host:N``.
- pssh host file: ``[user@]host[:port]``; the number after ``:`` is an ssh port there, not slots.
  A line with ``user@`` is read this way; pass ``fmt="pssh"`` to read every line so.
- ``-H`` / MLP_MPI_HOSTS strings: ``host:N,host:N``; OpenMPI's ``aa,aa,bb`` (2 slots on aa) too,
  and node sets such as ``worker[0-3]:8``.
Every error names the source, the line and the offending value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import MlpMagicError

# Host names and IPv4/IPv6 literals; anything else (spaces, quotes, ;, $, `) is refused so that
# no host name can ever smuggle shell syntax into an ssh or mpiexec command line.
_HOST_RE = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?$|^\[?[0-9A-Fa-f:.]+\]?$")
_USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_OMPI_KEYS = ("slots", "max_slots", "max-slots", "count", "cpu")


@dataclass(frozen=True)
class HostEntry:
    """One host as written in a host list."""

    name: str
    slots: int
    port: int | None = None  # ssh port (pssh format)
    user: str | None = None
    line: int = 0            # 1-based line (or item) number in the source, for messages


def check_host_name(name: str, where: str) -> str:
    if not name:
        raise MlpMagicError(f"{where}: empty host name")
    if not _HOST_RE.match(name):
        raise MlpMagicError(f"{where}: invalid host name {name!r} (letters, digits, '.', '-', '_' only)")
    return name


def _positive_int(text: str, what: str, where: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise MlpMagicError(f"{where}: {what} must be a positive integer, got {text!r}")
    return int(text)


def _strip_comment(line: str) -> str:
    return line.split("#", 1)[0].strip()


def _parse_openmpi_line(tokens: list[str], where: str, lineno: int) -> HostEntry:
    name = check_host_name(tokens[0], where)
    slots = 1
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        if not sep or key not in _OMPI_KEYS:
            raise MlpMagicError(f"{where}: unexpected {token!r} (expected slots=N or max_slots=N)")
        number = _positive_int(value, key, where)
        if key in ("slots", "count", "cpu"):
            slots = number
    return HostEntry(name, slots, line=lineno)


def _parse_pssh_item(item: str, where: str, lineno: int) -> HostEntry:
    user = None
    if "@" in item:
        user, _, item = item.rpartition("@")
        if not _USER_RE.match(user):
            raise MlpMagicError(f"{where}: invalid user name {user!r}")
    host, sep, port = item.partition(":")
    port_number = None
    if sep:
        port_number = _positive_int(port, "ssh port", where)
        if port_number > 65535:
            raise MlpMagicError(f"{where}: ssh port {port_number} is above 65535")
    return HostEntry(check_host_name(host, where), 1, port=port_number, user=user, line=lineno)


def _parse_colon_item(item: str, where: str, lineno: int) -> HostEntry:
    host, sep, slots = item.partition(":")
    count = _positive_int(slots, "slots", where) if sep else 1
    return HostEntry(check_host_name(host, where), count, line=lineno)


def _parse_line(line: str, fmt: str, where: str, lineno: int) -> HostEntry:
    tokens = line.split()
    if fmt == "pssh" or ("@" in tokens[0] and len(tokens) == 1):
        if len(tokens) > 1:
            raise MlpMagicError(f"{where}: unexpected {tokens[1]!r} after the host")
        return _parse_pssh_item(tokens[0], where, lineno)
    if len(tokens) == 1 and ":" in tokens[0] and tokens[0].count(":") == 1:
        return _parse_colon_item(tokens[0], where, lineno)
    return _parse_openmpi_line(tokens, where, lineno)


def _reject_duplicates(entries: list[HostEntry], source: str) -> None:
    first_line: dict[str, int] = {}
    for entry in entries:
        if entry.name in first_line:
            raise MlpMagicError(
                f"{source} line {entry.line}: duplicate host {entry.name!r} "
                f"(already on line {first_line[entry.name]}; give its slots once)"
            )
        first_line[entry.name] = entry.line


def parse_hostfile(text: str, source: str = "hostfile", fmt: str = "auto") -> list[HostEntry]:
    """Parse a hostfile's text. ``fmt`` is ``auto`` (OpenMPI or MPICH lines) or ``pssh``."""
    if fmt not in ("auto", "pssh"):
        raise MlpMagicError(f"unknown hostfile format {fmt!r} (auto or pssh)")
    entries = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        if line:
            entries.append(_parse_line(line, fmt, f"{source} line {lineno}", lineno))
    if not entries:
        raise MlpMagicError(f"{source}: no hosts in it (empty, or only comments)")
    _reject_duplicates(entries, source)
    return entries


def split_outside_brackets(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` except inside ``[...]`` (so ``w[0-3,7]:8,x`` is two items)."""
    items, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == sep and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return items


def _expand_node_set(item: str, where: str) -> list[str]:
    if "[" not in item and "]" not in item:
        return [item]
    from .ranges import expand_hosts  # pure module; imported late to keep this one standalone

    return expand_hosts(item)


def parse_host_list(text: str, source: str = "-H") -> list[HostEntry]:
    """Parse ``host:N,host:N`` (repeats add slots, as OpenMPI's ``-H aa,aa,bb``)."""
    if not text or not text.strip():
        raise MlpMagicError(f"{source}: empty host list")
    slots: dict[str, int] = {}
    first_item: dict[str, int] = {}
    for number, raw in enumerate(split_outside_brackets(text.strip()), 1):
        where = f"{source} item {number}"
        item = raw.strip()
        if not item:
            raise MlpMagicError(f"{where}: empty entry in {text!r}")
        names_part, sep, count = item.rpartition(":") if not item.endswith("]") else (item, "", "")
        if not sep:
            names_part, count = item, ""
        per_host = _positive_int(count, "slots", where) if sep else 1
        for name in _expand_node_set(names_part, where):
            check_host_name(name, where)
            slots[name] = slots.get(name, 0) + per_host
            first_item.setdefault(name, number)
    return [HostEntry(name, count, line=first_item[name]) for name, count in slots.items()]
