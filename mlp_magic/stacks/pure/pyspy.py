"""What ``py-spy dump --json`` prints, boiled down to each thread's frames, and what its failures
mean (pure).

py-spy lists every thread, innermost frame first, with ``active: false`` for a thread that
waits (its "idle"); the main thread is the one whose OS thread id is the process's pid. We keep
the main thread first and each stack outermost first, as a traceback reads. A failure is named
by its cause: ptrace refused, the process gone, not a Python, or py-spy's own first line.
"""
from __future__ import annotations

import json
import re

PTRACE, GONE, NOT_PYTHON, TIMEOUT, NO_PYSPY, OTHER = (
    "ptrace refused", "gone", "not Python", "timeout", "no py-spy", "failed")
PTRACE_FIX = ("py-spy attaches with ptrace: run as root or as the processes' user with CAP_SYS_PTRACE "
              "(docker run --cap-add SYS_PTRACE), and allow it with kernel.yama.ptrace_scope=0 "
              "(sysctl -w kernel.yama.ptrace_scope=0)")
NO_PYSPY_FIX = "install py-spy on every host: pip install 'py-spy>=0.3' (mlp_magic depends on it)"
_PTRACE = re.compile(r"Permission denied|Operation not permitted|os error (1|13)\)|Permission Denied")
_GONE = re.compile(r"No such (file or directory|process)|Check that the process is running|os error (2|3)\)")
_NOT_PYTHON = re.compile(r"Failed to find python version|not a python|Failed to find a python interpreter",
                         re.IGNORECASE)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


class DumpError(ValueError):
    """py-spy's output could not be read as its JSON."""


def _function(name) -> str:
    """A frame's function; a native one py-spy could not name is ``??``, not its address (which
    differs from process to process and would split ranks that are in the same place)."""
    name = str(name or "??")
    return "??" if _ADDRESS.fullmatch(name) else name


def line_number(value) -> int:
    """A frame's line number, or ValueError: JSON also reads Infinity (``int()``: OverflowError),
    1e308 and "12", which no file has."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 31:
        raise ValueError(f"a line number {str(value)[:20]!r}")
    return value


def thread_record(thread: dict, pid: int) -> dict:
    """One thread of py-spy's JSON -> {"name", "main", "idle", "frames": [[file, line, function]]},
    frames outermost first."""
    frames = [[str(f.get("filename") or ""), line_number(f.get("line") or 0), _function(f.get("name"))]
              for f in reversed(thread.get("frames") or []) if isinstance(f, dict)]
    name = thread.get("thread_name") or "thread"
    main = thread.get("os_thread_id") == pid or name == "MainThread"
    return {"name": str(name), "main": bool(main), "idle": not thread.get("active", True), "frames": frames}


def parse_dump_json(text: str, pid: int) -> list:
    """py-spy's JSON for one process -> thread records, the main thread first."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise DumpError(f"py-spy's output is not JSON: {err} (it starts {text[:60]!r})") from None
    if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
        raise DumpError(f"py-spy's JSON is not a list of threads (it starts {text[:60]!r})")
    try:
        threads = [thread_record(t, pid) for t in data]
    except (TypeError, ValueError) as err:
        raise DumpError(f"py-spy's JSON has a frame that is not one: {err}") from None
    return sorted(threads, key=lambda t: not t["main"])   # stable: py-spy's order otherwise


def frames_of(thread: dict) -> tuple:
    """A thread record's frames as Frame values (outermost first); ValueError or TypeError where
    one is not [file, line, function]."""
    # here: the hosts' scanner never needs it (nor dataclasses)
    from mlp_magic.stacks.pure.frames import Frame

    return tuple(Frame(str(file), line_number(line), str(function)).canonical()
                 for file, line, function in thread["frames"])


def classify_failure(stderr: str) -> tuple:
    """py-spy's stderr when it failed -> (cause, one line saying what happened)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    first = next((line for line in lines if line.startswith("Error:")), lines[0] if lines else "")
    cause = next((line.split(":", 1)[1].strip() for line in lines if re.match(r"^\d+:", line)), "")
    message = first.replace("Error:", "", 1).strip() or "py-spy failed without a message"
    if cause and cause not in message:
        message = f"{message} ({cause})"
    if _PTRACE.search(stderr):
        return PTRACE, message
    if _GONE.search(stderr):
        return GONE, "the process exited meanwhile"
    if _NOT_PYTHON.search(stderr):
        return NOT_PYTHON, "not a Python process (py-spy found no interpreter in it)"
    return OTHER, message[:300]
