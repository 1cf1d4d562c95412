"""What a rank's error says, as the user reads it: one line, a plain traceback, causes grouped.

ipyparallel hands the kernel a RemoteError (the rank's exception type and message under
``ename`` and ``evalue``, its traceback as text), an EngineError for a rank that died, or a
local exception (a value it could not load). Every message about a rank's failure is made here.
"""
from __future__ import annotations

import re

from mlp_magic.core.ranges import fold_hosts
from mlp_magic.engine.capture import CELL_TAG
from mlp_magic.output.pure.grouping import ranks_label

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL_NUMBER = re.compile(r"(Cell |Input )?In ?\[\d*\]")


class Failed:
    """A rank's call that raised or could not be answered (its engine died, a value that
    ipyparallel could not deserialise): ``message`` says what, in one line."""

    def __init__(self, message: str):
        self.message = message

    def __repr__(self) -> str:
        return f"Failed({self.message!r})"


def one_line(error: BaseException) -> str:
    """The rank's exception in one line: its type and message (``ImportError: libmpi.so.40:
    ...``), the last line of its traceback when it has no message."""
    name = getattr(error, "ename", None) or type(error).__name__
    value = getattr(error, "evalue", None)
    if value is None:
        value = str(error)
    text = " ".join(str(value).split())
    if not text:
        lines = [line for line in (getattr(error, "traceback", None) or "").splitlines() if line.strip()]
        text = " ".join(lines[-1].split()) if lines else ""
    return f"{name}: {text}" if text and text != name else name


# Errors whose traceback tells the user nothing they can act on: (type, what its message holds,
# what happened and what to do, in one line).
_PLAIN_ERRORS = (
    ("ValueError", "trying to initialize the default process group twice",
     "torch.distributed's default process group exists already (an earlier cell made it): use "
     "it as it is; `if not dist.is_initialized():` before `init_process_group` makes the cell "
     "safe to run again"),
)


def traceback_text(error) -> str:
    """A rank's traceback as plain text, without what differs between ranks for no reason
    (colours, execution counts), so identical failures group together; a known error whose
    traceback helps nobody is one line saying what to do."""
    name, value = getattr(error, "ename", None) or type(error).__name__, str(getattr(error, "evalue", error))
    for known, holds, said in _PLAIN_ERRORS:
        if name == known and holds in value:
            return f"{name}: {said}\n"
    lines = getattr(error, "traceback", None) or f"{error}"
    if isinstance(lines, list):
        lines = "\n".join(lines)
    text = _CELL_NUMBER.sub("Cell", _ANSI.sub("", lines))
    # The source listing may reach our trailing tag line: it is not the user's code.
    text = "\n".join(line for line in text.split("\n") if CELL_TAG not in line)
    return text.rstrip() + "\n"


def grouped_causes(causes: dict, host_of) -> str:
    """{rank: cause} -> "rank 1 on w1: X; ranks 2-3 (2) on w[2-3]: Y": each cause once."""
    by_cause: dict = {}
    for rank in sorted(causes):
        by_cause.setdefault(causes[rank], []).append(rank)
    return "; ".join(f"{ranks_label(ranks, fold_hosts(dict.fromkeys(host_of(r) for r in ranks)))}: {text}"
                     for text, ranks in by_cause.items())
