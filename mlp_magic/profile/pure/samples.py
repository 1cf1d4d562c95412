"""A rank's samples (pure): what ``py-spy record --format raw --threads --idle`` wrote, read back as
the cell's stacks with their counts, and where that time went.

py-spy writes one line per distinct stack: ``thread (TID): NAME;outer (file:line);...;inner
(file:line) COUNT``. The cell runs in the engine's main thread; its samples are those whose stack
holds a frame of the kernel's cell, cut from the cell on (``from_the_cell``), so that every rank's
stacks compare equal. The engine's other threads (heartbeat, output), its idle time between cells
and our own calls around the cell (the sampler's start and stop) are left out.
"""
from __future__ import annotations

import re
from collections import Counter

from mlp_magic.core.source_files import is_kernel_cell, short_path
from mlp_magic.stacks.pure.frames import Frame, from_the_cell

MAIN_THREAD = "MainThread"
_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")
# A torch.distributed collective, where the user's code waits for the other ranks (their
# Python frames); MPI's (mpi4py calls C directly) show as native frames under --native only.
C10D_FILES = ("torch/distributed/distributed_c10d.py",)
C10D_SKIPPED = {"wrapper"}   # its decorators' frames; its private helpers start with "_"
_MPI_NATIVE = re.compile(r"^P?MPI_[A-Z][a-z_]*")


def parse_raw(text: str) -> Counter:
    """{the cell's frames (outermost first): samples} of one rank's raw output; the main
    thread's samples outside a cell are dropped, as are the other threads'."""
    stacks: Counter = Counter()
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if not match:
            continue
        thread, *frames = match.group("stack").split(";")
        if not thread.endswith(f": {MAIN_THREAD}"):
            continue
        ordered = [_frame(piece) for piece in frames]
        if any(is_kernel_cell(frame.file) for frame in ordered):   # not our own calls' code
            stacks[from_the_cell(ordered)] += int(match.group("count"))
    return stacks


def _frame(piece: str) -> Frame:
    match = _FRAME.match(piece)
    if not match:
        return Frame("", 0, piece)
    return Frame(match.group("file"), int(match.group("line") or 0), match.group("function"))


def collective_of(frames: tuple) -> str | None:
    """The collective a stack waits in (``all_reduce``, ``MPI_Allreduce``), or None."""
    for frame in frames:
        if frame.file.endswith(C10D_FILES) and frame.function not in C10D_SKIPPED \
                and not frame.function.startswith("_"):
            return frame.function
        native = _MPI_NATIVE.match(frame.function)
        if native:
            return native.group(0).removeprefix("P")
    return None


def where_it_went(stacks: Counter) -> Counter:
    """{what the cell did: samples}: the innermost line of the user's code outside a collective
    (``slow_step (cell:4)``), or the collective it waited in (``in all_reduce``)."""
    spent: Counter = Counter()
    for frames, count in stacks.items():
        collective = collective_of(frames)
        spent[f"in {collective}" if collective else user_place(frames)] += count
    return spent


def user_place(frames: tuple) -> str:
    """``slow_step (cell:4)``: the innermost frame of the user's code, its function and line."""
    mine = [frame for frame in frames if frame.line > 0 and frame.is_user] or list(frames[:1])
    inner = mine[-1]
    return f"{inner.function} ({short_path(inner.file)}:{inner.line})"


def in_collectives(spent: Counter) -> int:
    return sum(count for place, count in spent.items() if place.startswith("in "))


def stack_text(frames: tuple) -> str:
    """A stack as one line of collapsed text (flame graph tools read it): ``f (file:line);...``."""
    return ";".join(f"{f.function} ({f.file}:{f.line})" if f.line > 0 else f"{f.function} ({f.file})"
                    for f in frames)
