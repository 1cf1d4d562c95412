"""Parsers for every host-list format a job may hand us (pure: text in, HostEntry list out).

Formats (see shared/reference/platform.md section 3):
- OpenMPI / DeepSpeed / Horovod hostfile: ``[user@]host slots=N [max_slots=M]`` (also ``count=``,
  ``cpu=``, ``username=``, ``port=``, spaces around ``=``); a bare ``host`` is 1 slot.
- MPICH / Hydra machinefile: ``host:N``.
- pssh host file: ``[user@]host[:port] [user]``; the number after ``:`` is an ssh port there, not
  slots. A single ``user@host[:port]`` word is read this way; pass ``fmt="pssh"`` to read every
  line so.
- ``-H`` / MLP_MPI_HOSTS strings: ``host:N,host:N``; OpenMPI's ``aa,aa,bb`` (2 slots on aa) too.
- Node sets such as ``worker[0-3]:8`` in host lists and hostfiles.
Host names are DNS-style names, IPv4 or (unbracketed) IPv6 addresses: nothing else, so that no
host name can smuggle shell syntax or an option into an ssh or mpiexec command line.
Every error is one MlpMagicError naming the source, the line (or item) and the offending value.
"""
from __future__ import annotations

import re

from mlp_magic.errors import MlpMagicError
from mlp_magic.core.ranges import expand_hosts, quote
from mlp_magic.core.records import Record

LOCALHOST = "localhost"  # this machine in a host list (machine/names: all its names)
LOOPBACK = "127.0.0.1"   # its address, a local World's master
MAX_SLOTS = 1 << 20      # per host; a typo such as slots=80000000 fails here, not in a layout
MAX_PORT = 65535
_MAX_NAME = 253          # DNS limit

_HOSTNAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?")
_IPV6_TEXT = re.compile(r"[0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.\-]+)?")
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_DIGITS = re.compile(r"[0-9]+")           # ASCII only: str.isdigit() accepts '²', which int() refuses
_EQUALS = re.compile(r"\s*=\s*")

# OpenMPI/PRRTE hostfile keys (its hostfile_lex.l), by what they set.
_OMPI_KEYS = {
    **dict.fromkeys(("slots", "count", "cpu"), "slots"),
    **dict.fromkeys(("max_slots", "max-slots", "slots_max", "slots-max", "max_cpu", "max-cpu",
                     "cpu_max", "cpu-max", "max_count", "max-count", "count_max", "count-max"), "max_slots"),
    **dict.fromkeys(("username", "user_name", "user-name"), "user"),
    "port": "port",
}


class HostEntry(Record, frozen=True):
    """One host as written in a host list."""

    name: str
    slots: int
    port: int | None = None  # ssh port (pssh format, OpenMPI port=)
    user: str | None = None
    line: int = 0            # 1-based line (or item) number in the source, for messages


def _is_ipv6(name: str) -> bool:
    if ":" not in name or not _IPV6_TEXT.fullmatch(name):
        return False
    import ipaddress  # here: most host lists have no IPv6 literal, and the CLI's start counts

    try:
        ipaddress.IPv6Address(name)
    except ValueError:
        return False
    return True


def check_host_name(name: str, where: str) -> str:
    if not name:
        raise MlpMagicError(f"{where}: empty host name")
    if len(name) <= _MAX_NAME and (_HOSTNAME.fullmatch(name) or _is_ipv6(name)):
        return name
    raise MlpMagicError(
        f"{where}: invalid host name {quote(name)} (letters, digits, '.', '-', '_', or an IP address)"
    )


def _count(text: str, what: str, where: str, limit: int = MAX_SLOTS) -> int:
    """A positive ASCII integer up to ``limit``."""
    return parse_count(text, f"{where}: {what}", limit)


def parse_count(text: str, label: str, limit: int, least: int = 1) -> int:
    """ASCII digits, from ``least`` (0 or 1) up to ``limit``; refused in one line naming ``label``."""
    if not _DIGITS.fullmatch(text):
        raise MlpMagicError(f"{label} must be a {_COUNT_WORDS[least]} integer, got {quote(text)}")
    value = int(text) if len(text) <= 18 else limit + 1  # no int() of a 5,000-digit string
    if value < least:
        raise MlpMagicError(f"{label} must be a {_COUNT_WORDS[least]} integer, got {quote(text)}")
    if value > limit:
        raise MlpMagicError(f"{label} {quote(text)} is more than {limit}")
    return value


_COUNT_WORDS = {0: "non-negative", 1: "positive"}


def _port(text: str, where: str) -> int:
    return _count(text, "ssh port", where, MAX_PORT)


def _user(text: str, where: str) -> str:
    if not _USER.fullmatch(text):
        raise MlpMagicError(f"{where}: invalid user name {quote(text)}")
    return text


def _strip_comment(line: str) -> str:
    return line.split("#", 1)[0].strip()


def expand_names(text: str, where: str) -> list:
    """A host name or a node set (``worker[0-3]``), each name checked."""
    if "[" in text or "]" in text:
        try:
            names = expand_hosts(text)
        except MlpMagicError as err:
            raise MlpMagicError(f"{where}: {err}") from None
    else:
        names = [text]
    if not names:
        raise MlpMagicError(f"{where}: empty host name")
    return [check_host_name(name, where) for name in names]


def _split_user(word: str, where: str) -> tuple:
    """``user@host`` -> (user, host); no ``@`` -> (None, word)."""
    if "@" not in word:
        return None, word
    user, _, host = word.rpartition("@")
    return _user(user, where), host


def _parse_openmpi_line(tokens: list, where: str, lineno: int) -> list:
    user, host = _split_user(tokens[0], where)
    values: dict = {}
    for token in tokens[1:]:
        key, sep, value = token.partition("=")
        kind = _OMPI_KEYS.get(key) if sep else None
        if kind is None:
            raise MlpMagicError(
                f"{where}: unexpected {quote(token)} (expected slots=N, max_slots=N, username=U or port=P)"
            )
        if kind in values or (kind == "user" and user):
            raise MlpMagicError(f"{where}: {kind} given twice ({quote(token)})")
        values[kind] = value
    slots = _count(values["slots"], "slots", where) if "slots" in values else 1
    if "max_slots" in values and _count(values["max_slots"], "max_slots", where) < slots:
        raise MlpMagicError(f"{where}: max_slots={values['max_slots']} is below slots={slots}")
    user = _user(values["user"], where) if "user" in values else user
    port = _port(values["port"], where) if "port" in values else None
    return [HostEntry(name, slots, port, user, lineno) for name in expand_names(host, where)]


def _split_host_port(item: str, where: str) -> tuple:
    """``host[:port]``; an IPv6 address with a port is written ``[addr]:port``."""
    if item.startswith("[") and "]:" in item and _is_ipv6(item[1:item.index("]:")]):
        host, _, port = item[1:].partition("]:")
        return host, _port(port, where)
    if item.count(":") > 1:  # a bare IPv6 address: no port
        return item, None
    host, sep, port = item.partition(":")
    return host, (_port(port, where) if sep else None)


def _parse_pssh_line(tokens: list, where: str, lineno: int) -> list:
    if len(tokens) > 2:
        raise MlpMagicError(f"{where}: unexpected {quote(tokens[2])} (expected [user@]host[:port] [user])")
    user, item = _split_user(tokens[0], where)
    if len(tokens) == 2:
        if user:
            raise MlpMagicError(f"{where}: user given twice ({quote(user)} and {quote(tokens[1])})")
        user = _user(tokens[1], where)
    host, port = _split_host_port(item, where)
    return [HostEntry(name, 1, port, user, lineno) for name in expand_names(host, where)]


def _parse_colon_line(word: str, where: str, lineno: int) -> list:
    host, _, slots = word.partition(":")
    count = _count(slots, "slots", where)
    return [HostEntry(name, count, line=lineno) for name in expand_names(host, where)]


def _parse_line(line: str, fmt: str, where: str, lineno: int) -> list:
    if fmt == "pssh":
        return _parse_pssh_line(line.split(), where, lineno)
    tokens = _EQUALS.sub("=", line).split()
    if len(tokens) == 1 and "@" in tokens[0]:
        return _parse_pssh_line(tokens, where, lineno)
    if len(tokens) == 1 and tokens[0].count(":") == 1:
        return _parse_colon_line(tokens[0], where, lineno)
    return _parse_openmpi_line(tokens, where, lineno)


def reject_duplicates(places, source: str, units: str = "lines") -> None:
    """``places``: (host name, its line or entry number), in order. Host names are
    case-insensitive; a host listed twice would get two separate blocks of ranks (and mpiexec
    would merge them): refused, naming both places."""
    first: dict = {}
    for name, number in places:
        seen = first.setdefault(name.lower(), number)
        if seen != number:
            raise MlpMagicError(f"{source}: host {quote(name)} is listed twice "
                                f"({units} {seen} and {number}; list it once)")


def parse_hostfile(text: str, source: str = "hostfile", fmt: str = "auto") -> list[HostEntry]:
    """Parse a hostfile's text. ``fmt`` is ``auto`` (OpenMPI or MPICH lines) or ``pssh``."""
    if fmt not in ("auto", "pssh"):
        raise MlpMagicError(f"unknown hostfile format {fmt!r} (auto or pssh)")
    entries: list = []
    # "\n" only: str.splitlines() also breaks at \f, \v, \x1c..., which editors do not, and the
    # line numbers in our messages must match what the user sees.
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = _strip_comment(raw)
        if line:
            entries += _parse_line(line, fmt, f"{source} line {lineno} {quote(line)}", lineno)
    if not entries:
        raise MlpMagicError(f"{source}: no hosts in it (empty, or only comments)")
    reject_duplicates(((e.name, e.line) for e in entries), source)
    return entries


def split_outside_brackets(text: str, sep: str = ",") -> list:
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


def _list_item_hosts(item: str, where: str) -> tuple:
    """``names[:N]`` -> (names, slots). More than one ``:`` is an IPv6 address (1 slot): a slot
    count after one would be ambiguous, so those go in a hostfile."""
    if item.count(":") > 1 and "[" not in item:
        return [check_host_name(item, where)], 1
    names, sep, count = item.rpartition(":")
    if not sep:
        return expand_names(item, where), 1
    return expand_names(names, where), _count(count, "slots", where)


def parse_host_list(text: str, source: str = "-H") -> list[HostEntry]:
    """Parse ``host:N,host:N`` (repeats add slots, as OpenMPI's ``-H aa,aa,bb``)."""
    if not isinstance(text, str) or not text.strip():
        raise MlpMagicError(f"{source}: empty host list")
    slots: dict = {}
    first_item: dict = {}
    spelled: dict = {}  # host names are case-insensitive: the first spelling is kept
    for number, raw in enumerate(split_outside_brackets(text.strip()), 1):
        item = raw.strip()
        where = f"{source} item {number} {quote(item)}"
        if not item:
            raise MlpMagicError(f"{source} item {number}: empty entry in {quote(text)}")
        names, per_host = _list_item_hosts(item, where)
        for name in names:
            key = spelled.setdefault(name.lower(), name)
            slots[key] = slots.get(key, 0) + per_host
            first_item.setdefault(key, number)
    too_many = [name for name, count in slots.items() if count > MAX_SLOTS]
    if too_many:
        raise MlpMagicError(f"{source}: host {quote(too_many[0])} adds up to more than {MAX_SLOTS} slots")
    return [HostEntry(name, count, line=first_item[name]) for name, count in slots.items()]
