"""Post-mortem on ranks (pure): which frame ``--frame K`` names, which ranks are inspected, and
the text ``%mpirun --where`` prints for one rank.

Frames are listed outermost first, as in a traceback. Only user frames are numbered
(``core.source_files.is_user_code``): ``--frame 0`` is the innermost frame of user code (where a
cell's own code failed or was interrupted, even when the error came from inside torch), 1 its
nearest user caller, and so on. Library frames between them keep no number.
"""
from __future__ import annotations

import re

from mlp_magic.errors import MlpMagicError
from mlp_magic.core.ranges import rank_words
from mlp_magic.core.records import Record
from mlp_magic.core.source_files import display_name

REPR_LIMIT = 80           # characters of a value's repr in --where
ERROR_LIMIT = 300         # characters of the error line
LOCALS_PER_FRAME = 30     # more are counted, not listed
LIBRARY_RUN_SHOWN = 3     # a run of library frames longer than this shows its two ends
# "<function f at 0x7f3a...>": the address differs from rank to rank and would split the groups
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+\b")   # an object's address differs between ranks


class LocalSummary(Record, frozen=True):
    """One local variable, as text the engine made from the live value."""

    name: str
    type_name: str
    shape: str = ""   # "(4, 5)" when the value has a shape
    dtype: str = ""
    text: str = ""    # its repr, any length (shortened when shown)


class FrameSummary(Record, frozen=True):
    file: str
    line: int
    function: str
    source: str = ""      # the line that ran
    user: bool = True
    local_values: tuple = ()


def user_frames(frames: list) -> list:
    """Indexes into ``frames`` of the user frames, innermost first: ``[K]`` is ``--frame K``."""
    return [i for i in reversed(range(len(frames))) if frames[i].user]


def short_text(text: str, limit: int = REPR_LIMIT) -> str:
    """One line (runs of white space, newlines included, become one space), at most ``limit``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:max(limit - 3, 0)] + "..."


def format_local(value: LocalSummary) -> str:
    """``name: type shape dtype = repr``, e.g. ``x: torch.Tensor (4, 5) float32 = tensor([...``;
    object addresses left out, so that equal values group across ranks."""
    kind = " ".join(part for part in (value.type_name, value.shape, value.dtype) if part)
    return f"{value.name}: {kind} = {short_text(_ADDRESS.sub('', value.text))}"


def _frame_place(frame: FrameSummary) -> str:
    return f"{display_name(frame.file)}, line {frame.line}, in {frame.function}"


def _library_run(frames: list) -> str:
    places = [f"{display_name(f.file)}:{f.line} {f.function}" for f in frames]
    if len(places) > LIBRARY_RUN_SHOWN:
        places = [places[0], "...", places[-1]]
    return f"    (library, {len(frames)} frame{'s' if len(frames) > 1 else ''}: {' > '.join(places)})"


def _user_frame_lines(frame: FrameSummary, number: int) -> list:
    lines = [f"  [frame {number}] {_frame_place(frame)}"]
    if frame.source.strip():
        lines.append(f"        {frame.source.strip()}")
    shown = frame.local_values[:LOCALS_PER_FRAME]
    lines.extend(f"          {format_local(value)}" for value in shown)
    if len(frame.local_values) > len(shown):
        lines.append(f"          ... and {len(frame.local_values) - len(shown)} more")
    return lines


def format_where(error: str, frames: list) -> str:
    """A rank's failure as a traceback of its user frames, numbered for ``--frame``, each with
    its locals; library frames folded into one line per run, those outside the first user
    frame (IPython's machinery) left out."""
    number = {index: k for k, index in enumerate(user_frames(frames))}
    if not number:
        return f"no frame of user code in the traceback\n{short_text(error, ERROR_LIMIT)}\n"
    lines = ["Traceback (most recent call last; --frame K as numbered):"]
    run: list = []
    for index in range(min(number), len(frames)):
        frame = frames[index]
        if not frame.user:
            run.append(frame)
            continue
        if run:
            lines.append(_library_run(run))
            run = []
        lines.extend(_user_frame_lines(frame, number[index]))
    if run:
        lines.append(_library_run(run))
    lines.append(short_text(error, ERROR_LIMIT))
    return "\n".join(lines) + "\n"


def choose_ranks(option: str, requested, frame_counts: dict, frame: int | None = None) -> list:
    """The ranks to inspect: ``requested`` (a list) or (None, empty) every rank with a failure.

    ``frame_counts``: {rank: number of user frames in its kept failure, or None for no failure}.
    With ``frame``, every chosen rank must have that frame. Bad choices: one MlpMagicError line.
    """
    failed = sorted(rank for rank, count in frame_counts.items() if count is not None)
    if not failed:
        raise MlpMagicError(f"{option}: no rank has a failure to inspect (a rank keeps its last "
                            "failure until its next cell succeeds)")
    chosen = sorted(set(requested)) if requested else failed
    clean = [rank for rank in chosen if frame_counts.get(rank) is None]
    if clean:
        verb = "has" if len(clean) == 1 else "have"
        raise MlpMagicError(f"{option}: {rank_words(clean)} {verb} no failure "
                            f"to inspect (with one: {rank_words(failed)})")
    if frame is not None:
        _check_frame(option, frame, {rank: frame_counts[rank] for rank in chosen})
    return chosen


def _check_frame(option: str, frame: int, counts: dict) -> None:
    short = {}
    for rank, count in counts.items():
        if frame >= count:
            short.setdefault(count, []).append(rank)
    if not short:
        return
    parts = [f"{rank_words(ranks)} {'has' if len(ranks) == 1 else 'have'} "
             + (f"{count} frame{'s' if count > 1 else ''} of user code (--frame 0-{count - 1})" if count
                else "no frame of user code")
             for count, ranks in sorted(short.items())]
    raise MlpMagicError(f"{option}: --frame {frame} is out of range: {'; '.join(parts)}")
