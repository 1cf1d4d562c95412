"""Stack frames: what they are, how they read, and how a rank's faulthandler dump becomes one
stack for the hang report (pure).

faulthandler prints every thread, most recent call first. The main thread ("Current thread",
which handles the signal) is the one running the cell; the others are the kernel's own
machinery. We keep the main thread, outermost call first like a traceback, and drop the kernel's
frames above the user's code (``rank_frames``). ``Frame`` is also what py-spy's dumps become
(``stacks/pure/pyspy``); ``frame_text`` is how every stack view shows one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from mlp_magic.core.source_files import is_cell, is_kernel_cell, is_user_code, short_path

_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[[^\]]*\])?"
                     r" \(most recent call first\):\s*$")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')
CELL = "<cell>"   # every rank's cell file under one name, so that their frames merge


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    @property
    def is_cell(self) -> bool:
        return is_cell(self.file)

    @property
    def is_user(self) -> bool:
        return is_user_code(self.file)

    def canonical(self) -> "Frame":
        """The same frame as every rank has it: a cell's file names its kernel's pid."""
        return Frame(CELL, self.line, self.function) if is_kernel_cell(self.file) else self


@dataclass(frozen=True)
class ThreadStack:
    current: bool
    ident: str
    frames: tuple  # most recent call first, as faulthandler prints


def parse_dump(text: str) -> list:
    threads, frames, header = [], [], None
    for line in text.splitlines():
        thread = _THREAD.match(line)
        frame = _FRAME.match(line)
        if thread:
            if header:
                threads.append(ThreadStack(header[0] == "Current thread", header[1], tuple(frames)))
            header, frames = thread.groups(), []
        elif frame and header:
            frames.append(Frame(frame.group(1), int(frame.group(2)), frame.group(3).strip()))
    if header:
        threads.append(ThreadStack(header[0] == "Current thread", header[1], tuple(frames)))
    return threads


def main_thread(threads: list) -> ThreadStack | None:
    current = [t for t in threads if t.current]
    return current[0] if current else (threads[-1] if threads else None)


def frame_text(frame: Frame) -> str:
    """``train.py:88 step``; a native frame (no line) ``all_reduce [libtorch_cpu.so]``."""
    if frame.line <= 0:
        return f"{frame.function} [{short_path(frame.file)}]" if frame.file else frame.function
    return f"{short_path(frame.file)}:{frame.line} {frame.function}"


IDLE = Frame("", 0, "idle: not running a cell")
NO_STACK = Frame("", 0, "(no Python stack in the dump)")
# ``%mpirun script.py`` runs the script from a generated cell through this module's run_script:
# the script's frames are the user's, the runner's are ours (matched by their end: another host
# may have mlp_magic installed elsewhere).
SCRIPT_RUNNER = "/mlp_magic/debugging/rank/script.py"


def rank_frames(dump: str) -> tuple:
    """One rank's place for the merged hang report: its main thread's frames from the cell on,
    outermost first; an idle rank (between cells) is the one pseudo-frame ``IDLE``, a rank whose
    dump is empty or unreadable ``NO_STACK``."""
    thread = main_thread(parse_dump(dump))
    if thread is None or not thread.frames:
        return (NO_STACK,)
    return from_the_cell(list(reversed(thread.frames)))


def from_the_cell(ordered: list) -> tuple:
    """An engine's main thread (outermost first, from faulthandler or py-spy) as the user reads
    it: from the cell on (the script's first frame on, for a script), ``IDLE`` without a cell."""
    start = next((i for i, f in enumerate(ordered) if f.is_cell), None)
    if start is None:
        return (IDLE,)
    frames = ordered[start:]
    runner = [i for i, f in enumerate(frames) if f.file.endswith(SCRIPT_RUNNER)]
    if runner and all(f.is_cell for f in frames[:runner[0]]) and len(frames) > runner[-1] + 1:
        frames = frames[runner[-1] + 1:]
    return tuple(f.canonical() for f in frames)


def user_line(frames) -> str | None:
    """``cell:4``: the innermost line of user code of a rank's frames (where it called what it
    waits in), None when it runs none."""
    mine = [frame for frame in frames if frame.file and frame.line > 0 and frame.is_user]
    return f"{short_path(mine[-1].file)}:{mine[-1].line}" if mine else None
