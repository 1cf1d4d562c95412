"""Rank ranges ("0-3,5") and host node sets ("worker[0-3,7]"): folding and expanding.

Pure functions, no I/O. Bad input raises ``MlpMagicError`` naming the offending piece.
Node-set syntax follows ClusterShell/Slurm: ``prefix[ranges]suffix`` items separated by
commas, zero padding kept (``gpu[01-16]``), several brackets in one item expand as a product.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

from mlp_magic.errors import MlpMagicError

# Upper bounds so that a typo ("0-99999999999") fails with a message instead of eating memory.
MAX_RANKS = 1 << 20
MAX_HOSTS = 100_000
_MAX_DIGITS = 18

_NUMBER = re.compile(r"[0-9]+")
_RANK_PIECE = re.compile(r"([0-9]+)(?:-([0-9]+))?")
_LAST_NUMBER = re.compile(r"^(.*?)([0-9]+)([^0-9]*)$", re.DOTALL)
# Characters that would make a folded node set ambiguous or unparseable.
_NODE_FORBIDDEN = re.compile(r"[\[\],\s]")


def quote(text: str, limit: int = 80) -> str:
    """The user's text for a message: repr'd (one line, whatever it holds), at most ``limit``
    characters with its ellipsis."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[:limit - 4] + "...'"


# ---------------------------------------------------------------- ranks


def fold_ranks(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 3, 5] -> "0-3,5" (sorted, duplicates dropped; "" for none)."""
    values = sorted({_as_rank(r) for r in ranks})
    return ",".join(_fold_sorted_numbers(values, width=0))


def rank_words(ranks) -> str:
    """ "rank 3" for one rank, "ranks 0-2,7" for more: how a message names a set of ranks."""
    ranks = list(ranks)
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {fold_ranks(ranks)}"


_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")   # where each rank's object lives: differs for no reason


def by_message(problems: dict) -> str:
    """{rank: message} -> 'ranks 1,3: message; rank 2: other': ranks with one message named once;
    messages that differ only in an object's address (``<function <lambda> at 0x7f...>``) are one."""
    ranks_of: dict = {}
    for rank, message in sorted(problems.items()):
        ranks_of.setdefault(_ADDRESS.sub("0x...", message), []).append(rank)
    return "; ".join(f"{rank_words(ranks)}: {message}" for message, ranks in ranks_of.items())


def parse_ranks(spec: str, world_size: int | None = None, *, option: str = "--ranks") -> list[int]:
    """ "0,2-3" -> [0, 2, 3]; "all" needs ``world_size``. Sorted, duplicates dropped."""
    if not isinstance(spec, str):
        raise MlpMagicError(f"{option}: expected text such as '0,2-3', got {spec!r}")
    if world_size is not None and (not isinstance(world_size, int) or world_size < 0):
        raise MlpMagicError(f"{option}: world size must be a non-negative integer, got {world_size!r}")
    text = spec.strip()
    if not text:
        raise MlpMagicError(f"{option}: empty rank list (use e.g. '0,2-3' or 'all')")
    chosen: set[int] = set()
    for piece in (p.strip() for p in text.split(",")):
        chosen.update(_parse_rank_piece(piece, text, world_size, option))
        if len(chosen) > MAX_RANKS:
            raise MlpMagicError(f"{option}: {quote(text)} names more than {MAX_RANKS} ranks")
    return sorted(chosen)


def _parse_rank_piece(piece: str, spec: str, world_size: int | None, option: str) -> range:
    if piece.lower() == "all":
        if world_size is None:
            raise MlpMagicError(f"{option}: 'all' needs a known number of ranks")
        return range(world_size)
    match = _RANK_PIECE.fullmatch(piece)
    if not match or any(len(g or "") > _MAX_DIGITS for g in match.groups()):
        what = quote(piece) if piece else "an empty item"
        where = "" if piece == spec else f" in {quote(spec)}"
        raise MlpMagicError(f"{option}: {what}{where} is not a rank or a range like 2-5")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if last < first:
        raise MlpMagicError(f"{option}: range {piece} goes backwards (write {last}-{first})")
    if world_size is not None and last >= world_size:
        valid = f"0-{world_size - 1}" if world_size else "(there are no ranks)"
        raise MlpMagicError(f"{option}: {piece} is out of range {valid}")
    if last - first >= MAX_RANKS:
        raise MlpMagicError(f"{option}: range {piece} covers more than {MAX_RANKS} ranks")
    return range(first, last + 1)


def _as_rank(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MlpMagicError(f"rank {value!r} is not an integer")
    if value < 0:
        raise MlpMagicError(f"rank {value} is negative")
    return value


def _fold_sorted_numbers(values: list[int], width: int) -> list[str]:
    """Sorted unique numbers -> ["0-3", "5"], each number zero-padded to ``width``."""
    pieces: list[str] = []
    start = prev = None
    for value in values:
        if prev is not None and value == prev + 1:
            prev = value
            continue
        if start is not None:
            pieces.append(_format_run(start, prev, width))
        start = prev = value
    if start is not None:
        pieces.append(_format_run(start, prev, width))
    return pieces


def _format_run(first: int, last: int, width: int) -> str:
    if first == last:
        return f"{first:0{width}d}"
    return f"{first:0{width}d}-{last:0{width}d}"


# ---------------------------------------------------------------- host node sets


def expand_hosts(spec: str) -> list[str]:
    """ "worker[0-1],gpu[01-02],login1" -> ["worker0", "worker1", "gpu01", "gpu02", "login1"].

    Order is kept as written; a name given twice appears once (at its first place).
    """
    if not isinstance(spec, str):
        raise MlpMagicError(f"host list: expected text such as 'worker[0-3]', got {spec!r}")
    names: dict[str, None] = {}
    generated = 0
    for item in _split_top_level(spec):
        item = item.strip()
        if not item:
            continue
        expanded = _expand_item(item, spec)
        generated += len(expanded)
        if generated > MAX_HOSTS:
            raise MlpMagicError(f"host list {quote(spec)} names more than {MAX_HOSTS} hosts")
        names.update(dict.fromkeys(expanded))
    return list(names)


def _split_top_level(spec: str) -> list[str]:
    """Split on commas that are not inside brackets; check that brackets pair up."""
    items, depth, start = [], 0, 0
    for index, char in enumerate(spec):
        if char == "[":
            if depth:
                raise MlpMagicError(f"host list {quote(spec)}: nested '['")
            depth = 1
        elif char == "]":
            if not depth:
                raise MlpMagicError(f"host list {quote(spec)}: ']' without '['")
            depth = 0
        elif char == "," and not depth:
            items.append(spec[start:index])
            start = index + 1
    if depth:
        raise MlpMagicError(f"host list {quote(spec)}: unclosed '['")
    items.append(spec[start:])
    return items


def _expand_item(item: str, spec: str) -> list[str]:
    """One item, e.g. "rack[1-2]-n[01-02]" -> the product of its brackets, in order."""
    if re.search(r"\s", item):
        raise MlpMagicError(f"host list {quote(spec)}: {quote(item)} contains whitespace")
    # re.split with a capturing group alternates: text, bracket body, text, ...
    parts = re.split(r"\[([^\]]*)\]", item)
    texts, bodies = parts[0::2], parts[1::2]
    choices = [_expand_bracket(body, item, spec) for body in bodies]
    total = 1
    for options in choices:
        total *= len(options)
    if total > MAX_HOSTS:
        raise MlpMagicError(f"host list {quote(spec)}: {quote(item)} names more than {MAX_HOSTS} hosts")
    names = []
    for combo in itertools.product(*choices):
        pieces = [texts[0]]
        for number, text in zip(combo, texts[1:]):
            pieces.append(number)
            pieces.append(text)
        names.append("".join(pieces))
    return names


def _expand_bracket(body: str, item: str, spec: str) -> list[str]:
    """ "01-03,7" -> ["01", "02", "03", "7"]; padding comes from each range's first number."""
    if not body:
        raise MlpMagicError(f"host list {quote(spec)}: empty brackets in {quote(item)}")
    numbers: list[str] = []
    for piece in body.split(","):
        match = _RANK_PIECE.fullmatch(piece)
        if not match or any(len(g or "") > _MAX_DIGITS for g in match.groups()):
            raise MlpMagicError(
                f"host list {quote(spec)}: {quote(piece)} is not a number or a range like 0-3")
        first_text, last_text = match.group(1), match.group(2) or match.group(1)
        first, last = int(first_text), int(last_text)
        if last < first:
            raise MlpMagicError(f"host list {quote(spec)}: range {piece} goes backwards")
        if len(numbers) + last - first >= MAX_HOSTS:
            raise MlpMagicError(f"host list {quote(spec)}: {quote(item)} names more than {MAX_HOSTS} hosts")
        width = len(first_text) if first_text.startswith("0") else 0
        numbers.extend(f"{n:0{width}d}" for n in range(first, last + 1))
    return numbers


def fold_hosts(names: Iterable[str]) -> str:
    """["worker0", "worker1", "worker3", "login"] -> "worker[0-1,3],login".

    Names are grouped by the text around their last number (and by zero padding);
    groups appear in the order of their first name; names without digits stay as given.
    """
    unique = list(dict.fromkeys(_checked_name(n) for n in names))
    padded_widths = _padded_widths(unique)
    groups: dict[tuple, list[int]] = {}
    for name in unique:
        match = _LAST_NUMBER.match(name)
        if not match:
            groups.setdefault((name, None, 0), [])
            continue
        prefix, digits, suffix = match.groups()
        width = _padding_class(digits, padded_widths.get((prefix, suffix), ()))
        groups.setdefault((prefix, suffix, width), []).append(int(digits))
    return ",".join(_format_group(key, numbers) for key, numbers in groups.items())


def _checked_name(name) -> str:
    if not isinstance(name, str) or not name:
        raise MlpMagicError(f"host name {name!r} is not a non-empty string")
    if _NODE_FORBIDDEN.search(name):
        raise MlpMagicError(f"host name {name!r} contains a bracket, comma or whitespace")
    return name


def _padded_widths(names: list[str]) -> dict[tuple[str, str], set[int]]:
    """For each (prefix, suffix), the zero-padded widths in use ("gpu01" -> 2)."""
    widths: dict[tuple[str, str], set[int]] = {}
    for name in names:
        match = _LAST_NUMBER.match(name)
        if match and _is_padded(match.group(2)):
            widths.setdefault((match.group(1), match.group(3)), set()).add(len(match.group(2)))
    return widths


def _is_padded(digits: str) -> bool:
    return len(digits) > 1 and digits.startswith("0")


def _padding_class(digits: str, widths) -> int:
    """Width this number is written with: "07" -> 2; "10" joins width 2 when "07"-style names exist."""
    if _is_padded(digits) or len(digits) in widths:
        return len(digits)
    return 0


def _format_group(key: tuple, numbers: list[int]) -> str:
    prefix, suffix, width = key
    if suffix is None:  # a name without digits
        return prefix
    if len(numbers) == 1:
        return f"{prefix}{numbers[0]:0{width}d}{suffix}"
    body = ",".join(_fold_sorted_numbers(sorted(numbers), width))
    return f"{prefix}[{body}]{suffix}"
