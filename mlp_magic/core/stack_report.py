"""Read faulthandler dumps and boil them down to what a user debugging a hang needs (pure).

faulthandler prints every thread, most recent call first. The main thread ("Current thread",
which handles the signal) is the one running the cell; the others are the kernel's own
machinery. We keep the main thread, outermost call first like a traceback, drop the kernel's
frames above the user's code, and mark the user's frames so the line that waits stands out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .source_files import display_name, is_cell, is_user_code

_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[[^\]]*\])?"
                     r" \(most recent call first\):\s*$")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')
USER_MARK = "-->"


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


def trimmed(frames: tuple) -> list:
    """Outermost first, starting at the first user frame (the cell), keeping what it calls."""
    ordered = list(reversed(frames))
    first_user = next((i for i, f in enumerate(ordered) if f.is_cell), None)
    if first_user is None:
        first_user = next((i for i, f in enumerate(ordered) if f.is_user), None)
    return ordered if first_user is None else ordered[first_user:]


def format_stack(dump: str) -> str:
    """The main thread's user-relevant frames, one per line, the user's marked ``-->``."""
    thread = main_thread(parse_dump(dump))
    if thread is None or not thread.frames:
        return "(no Python stack in the dump)\n"
    frames = trimmed(thread.frames)
    if not any(f.is_cell for f in frames):
        return "idle: not running a cell (" + frames[-1].function + ")\n"
    innermost_user = max(i for i, f in enumerate(frames) if f.is_user)
    lines = []
    for i, frame in enumerate(frames):
        mark = USER_MARK if i == innermost_user else ("  >" if frame.is_user else "   ")
        lines.append(f"{mark} {display_name(frame.file)}, line {frame.line}, in {frame.function}")
    return "\n".join(lines) + "\n"
