"""The note a rank appends to a stream the notebook saw only the start of, and reading it back.

The rank writes it (engine/capture); ``-o NAME`` reads it to fetch that rank's whole text from
the log the note names (mpirun/whole_output).
"""
from __future__ import annotations

import re
from typing import NamedTuple

_NOTE = re.compile(r"\n\[mlp_magic: ([0-9,]+) more characters not shown; "
                   r"full text in ([^\n:]+):([^\n]+)\]\n\Z")


class CappedStream(NamedTuple):
    """A stream the notebook saw the start of: ``shown`` (the note removed), how many characters
    were left out, and the log that holds them all (on ``host``)."""

    shown: str
    left_out: int
    host: str
    path: str


def cap_note(left_out: int, host: str, log_path: str, log_error: str) -> str:
    """The line that ends a stream: what the notebook did not get and where it is; "" when the
    notebook got everything and the log was written."""
    if left_out:
        where = (f"full text in {host}:{log_path}" if not log_error
                 else f"and the log could not be written ({log_error})")
        return f"\n[mlp_magic: {left_out:,} more characters not shown; {where}]\n"
    return f"\n[mlp_magic: this rank's output was not logged ({log_error})]\n" if log_error else ""


def capped_stream(text: str) -> CappedStream | None:
    """The stream's parts when it ends with a note naming its log, else None."""
    start = text.rfind("\n[mlp_magic: ") if text.endswith("]\n") else -1   # no scan of a long text
    found = _NOTE.match(text, start) if start >= 0 else None
    if found is None:
        return None
    return CappedStream(text[:start], int(found.group(1).replace(",", "")), found.group(2), found.group(3))
