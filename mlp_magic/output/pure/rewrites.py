"""What is new in a rank's stream text as ipyparallel's client keeps it (pure).

The client keeps each stream's text whole, and when a chunk holds ``\\r`` it rewrites the text to
what a terminal shows (on every line, all up to its last ``\\r`` before other text goes): the text
does not only grow. A complete line keeps what it shows, and its newline, but may still lose a
``\\r`` and what it hid, and so move the lines after it. So a reader keeps how many complete lines
it read, where they end, whether they hold a ``\\r`` yet to go (then it finds their end again), and
the current line it saw; what is new is what the current line gained, or, where it was rewritten,
``\\r`` and the whole current line: what a terminal would be told.
"""
from __future__ import annotations

import re
from typing import NamedTuple

_HIDING = re.compile(r"\r[^\n]")   # a carriage return the client may still take out, with what it hid


class Seen(NamedTuple):
    """How far a reader read: the end of the complete lines, how many they are, whether they may
    still change (a ``\\r`` in them), and the current line then."""
    stable: int = 0
    lines: int = 0
    current: str = ""
    settled: bool = True


def new_text(text: str, seen: Seen) -> tuple[str, Seen]:
    """(what is new since ``seen``, the reader's new ``Seen``)."""
    stable = seen.stable if seen.settled else _after_lines(text, seen.lines)
    settled = seen.settled or not _HIDING.search(text, 0, stable)
    tail = text[stable:]
    new = tail[len(seen.current):] if tail.startswith(seen.current) else "\r" + tail
    ends = tail.rfind("\n") + 1
    settled = settled and not _HIDING.search(tail, 0, ends)
    return new, Seen(stable + ends, seen.lines + tail.count("\n", 0, ends), tail[ends:], settled)


def _after_lines(text: str, count: int) -> int:
    """Where the first ``count`` lines of ``text`` end (the client keeps every newline)."""
    end = 0
    for _ in range(count):
        end = text.index("\n", end) + 1
    return end
