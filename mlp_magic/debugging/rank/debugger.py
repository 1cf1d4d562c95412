"""pdb on a rank, driven from the notebook: its input is a queue the control thread fills, its
output a buffer that goes back in the reply (debugging/rank/breakpoints).

Loaded when a rank first stops. The main thread runs pdb as ever (``n``, ``s``, ``p``...) and
waits for its next command in ``_Commands.readline``: that moment is the rank "stopped". There it
answers the control requests waiting for it, and, when it stopped anew (not after a ``p``), says
so on iopub. Frames of the engine's machinery (IPython, ipykernel, ipyparallel, mlp_magic, the
event loop) are never stepped into and are left out of ``where``; cell files are named ``cell``,
as everywhere else, so that ranks stopped at one line show one position.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import linecache
import os
import pdb
import queue
import sys
import threading
import traceback
from contextlib import redirect_stdout

from mlp_magic.engine.capture import CELL_TAG
from mlp_magic.core.source_files import OWN_PACKAGE, display_name, is_cell, is_user_code

ENGINE_MODULES = ("IPython.*", "ipykernel.*", "ipyparallel.*", "mlp_magic.*", "asyncio.*", "tornado.*",
                  "zmq.*", "traitlets.*", "jupyter_client.*", "runpy", "bdb", "pdb")
SOURCE_AROUND = 2   # lines shown before and after the one a rank stopped at
SAID_AGAIN_FIRST_S, SAID_AGAIN_MOST_S = 0.2, 5.0   # a stopped rank says so again after these


class RankDebugger(pdb.Pdb):
    """One cell's debugger on this rank. ``publish(content)`` says on iopub that it stopped."""

    def __init__(self, publish):
        self._commands = _Commands(self)
        self._output = _Output()
        super().__init__(stdin=self._commands, stdout=self._output, skip=ENGINE_MODULES,
                         nosigint=True, readrc=False)
        self.prompt = ""
        self._publish = publish
        self._lock = threading.Lock()
        self._waiters: list = []     # control requests' futures, answered at the next prompt
        self._entries_hidden = 0     # the position pdb prints on stopping: the reply carries it
        self.state = "running"       # running | stopped (waiting for a command) | busy (running one)
        self.stops = 0               # how many times it stopped: a stale "paused" is told apart
        self.fresh = False
        self.where: dict | None = None
        self.line_breaks: list = []  # `%mpirun --break`s: (real path or "cell", line, condition)
        self._in_file: dict = {}     # code file -> whether a line break is in it

    # ------------------------------------------------------------------ `%mpirun --break`
    def arm(self, breaks: list, frame) -> None:
        """Run on, traced, stopping at ``breaks`` (bdb's own breakpoints want files that exist
        beforehand: a cell's does not, so these are matched here)."""
        self.line_breaks, self._in_file = list(breaks), {}
        self.reset()
        self.botframe = frame
        self._run_to_breaks()
        sys.settrace(self.trace_dispatch)

    def _run_to_breaks(self) -> None:
        """As bdb's continue: stop at breakpoints only. bdb's ``_set_stopinfo`` is private: where
        it is gone, the three attributes it sets (bdb's since Python 2) are set here."""
        stopinfo = getattr(super(), "_set_stopinfo", None)
        if stopinfo is not None:
            stopinfo(self.botframe, None, -1)
        else:
            self.stopframe, self.returnframe, self.stoplineno = self.botframe, None, -1

    def break_anywhere(self, frame):
        path = frame.f_code.co_filename
        if path not in self._in_file:
            self._in_file[path] = any(_same_file(path, file) for file, _, _ in self.line_breaks)
        return self._in_file[path] or super().break_anywhere(frame)

    def break_here(self, frame):
        for file, line, condition in self.line_breaks:
            if frame.f_lineno == line and _same_file(frame.f_code.co_filename, file) \
                    and self._holds(condition, frame):
                return True
        return super().break_here(frame)

    def _holds(self, condition, frame) -> bool:
        if not condition:
            return True
        try:
            return bool(eval(condition, frame.f_globals, frame.f_locals))
        except Exception as error:  # noqa: BLE001 - as pdb does: stop, and say why
            self.message(f"*** error in the condition {condition!r}: {type(error).__name__}: {error}")
            return True

    def set_continue(self):
        if self.line_breaks:   # stay traced: the next breakpoint may come
            self._run_to_breaks()
        else:
            super().set_continue()

    # ------------------------------------------------------------------ pdb's side (main thread)
    def interaction(self, frame, tb):
        self.fresh, self._entries_hidden = True, 1
        try:
            super().interaction(frame, tb)
        finally:
            self.state = "running"

    def print_stack_entry(self, frame_lineno, prompt_prefix=pdb.line_prefix):
        if self._entries_hidden:
            self._entries_hidden -= 1
            return
        super().print_stack_entry(frame_lineno, prompt_prefix)

    def format_stack_entry(self, frame_lineno, lprefix=": "):
        entry = super().format_stack_entry(frame_lineno, lprefix)
        path = frame_lineno[0].f_code.co_filename
        return entry.replace(self.canonic(path), display_name(path), 1)

    def get_stack(self, f, t):
        """pdb's stack, from the user's outermost frame: the engine's frames below it left out."""
        stack, index = super().get_stack(f, t)
        first = next((i + 1 for i in range(index, -1, -1) if self._engine_frame(stack[i][0])), 0)
        return stack[first:], index - first

    def stop_here(self, frame):
        """Stop only in code the user's code runs: never in the engine's machinery, nor in what it
        calls on its own (IPython's context managers, between a cell's statements)."""
        return super().stop_here(frame) and self._beneath_user(frame)

    def user_call(self, frame, argument_list):
        if not self._cell_statement(frame):   # its first line is where a step stops
            super().user_call(frame, argument_list)

    def user_return(self, frame, return_value):
        """IPython runs a cell statement by statement: the end of one that is not the cell's
        last goes on to the next statement's first line, as a step over a line should."""
        if self._cell_statement(frame) and _more_of_the_cell(frame):
            self.set_step()
            return
        super().user_return(frame, return_value)

    def _engine_frame(self, frame) -> bool:
        return self.is_skipped_module(frame.f_globals.get("__name__")) or \
            frame.f_code.co_filename.startswith(OWN_PACKAGE)

    def _beneath_user(self, frame) -> bool:
        while frame is not None and not self._engine_frame(frame):
            if is_user_code(frame.f_code.co_filename):
                return True
            frame = frame.f_back
        return False

    def _cell_statement(self, frame) -> bool:
        """A frame running one top-level statement of a cell (its caller is IPython's)."""
        return is_cell(frame.f_code.co_filename) and frame.f_back is not None and \
            self._engine_frame(frame.f_back)

    def at_prompt(self) -> None:
        """pdb waits for a command: answer whoever waits for one, say it stopped if it is new."""
        frame = self.curframe
        with self._lock:
            self.state = "stopped"
            if self.fresh:
                self.stops += 1
            self.where = position(frame, frame.f_lineno)
            waiters, self._waiters = self._waiters, []
            # with nobody waiting (a command that outlived its request), its answer waits for the next
            reply = self._snapshot() if waiters else None
        if self.fresh:
            self.fresh = False
            self.say_stopped()
        _answer(waiters, reply)

    def say_stopped(self) -> None:
        self._publish({"stop": self.stops, "where": self.where})

    def run_code(self, code: str) -> None:
        """``%%mpirun --pdb``: a block of Python in the current frame, as pdb's ``!`` runs one line."""
        try:
            compiled = compile(code, "<pdb cell>", "exec")
            with redirect_stdout(self._output):   # print() in the block: its answer
                exec(compiled, self.curframe.f_globals, self.curframe_locals)
        except Exception as error:  # noqa: BLE001 - shown under the rank, as pdb shows its errors
            self.message("".join(traceback.format_exception_only(type(error), error)).rstrip())

    # ------------------------------------------------------------------ the control thread's side
    async def ask(self, command: str | None, code: str | None, wait: float) -> dict:
        """Run one command (or block of code) and answer with what pdb wrote once it waits again;
        after ``wait`` seconds, "running" with what it wrote so far."""
        with self._lock:
            if self.state != "stopped" or (command is None and code is None):
                return self._snapshot()
            future = concurrent.futures.Future()
            self._waiters.append(future)
            self.state = "busy"
            self._commands.put(("code", code) if code is not None else ("line", command))
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), wait)
        except asyncio.TimeoutError:
            with self._lock:
                if future in self._waiters:   # its answer now waits for the next request
                    self._waiters.remove(future)
                snapshot = self._snapshot()
            return {**snapshot, "state": "running" if snapshot["state"] == "busy" else snapshot["state"]}

    def _snapshot(self) -> dict:
        output = self._output.take()
        where = self.where if self.state == "stopped" else None
        return {"state": self.state, "output": output, "where": where, "stop": self.stops}

    def close(self) -> None:
        """The cell ended: requests still waiting are told so."""
        with self._lock:
            self.state = "ended"
            reply = self._snapshot()
            waiters, self._waiters = self._waiters, []
        _answer(waiters, reply)


class _Output:
    """pdb's stdout: written by the main thread, taken whole by the control thread."""

    def __init__(self):
        self._parts: list = []
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def take(self) -> str:
        with self._lock:
            parts, self._parts = self._parts, []
        return "".join(parts)


class _Commands:
    """pdb's stdin: each ``readline`` is the moment the rank stops for a command."""

    def __init__(self, debugger: RankDebugger):
        self._debugger = debugger
        self._queue: queue.Queue = queue.Queue()

    def put(self, item: tuple) -> None:
        self._queue.put(item)

    def readline(self) -> str:
        while True:
            self._debugger.at_prompt()
            try:
                kind, text = self._next()
            except KeyboardInterrupt:   # Ctrl-C in the notebook while stopped: debugging ends
                return "q\n"
            if kind == "line":
                return text + "\n"
            self._debugger.run_code(text)

    def _next(self) -> tuple:
        """The next command. Meanwhile the rank says again, less and less often, that it is
        stopped: its first word can reach the kernel before the kernel listens to the cell's
        messages (a breakpoint in a cell's first line), and the kernel takes a repeat as one."""
        wait = SAID_AGAIN_FIRST_S
        while True:
            try:
                return self._queue.get(timeout=wait)
            except queue.Empty:
                self._debugger.say_stopped()
                wait = min(2 * wait, SAID_AGAIN_MOST_S)


def position(frame, line: int) -> dict:
    """Where a frame is, as the notebook groups and shows it: file (``cell`` for cells), line,
    function, and the source around the line."""
    path = frame.f_code.co_filename
    linecache.checkcache(path)
    source = [[n, linecache.getline(path, n, frame.f_globals).rstrip("\n")]
              for n in range(max(1, line - SOURCE_AROUND), line + SOURCE_AROUND + 1)]
    while source and source[-1][0] > line and (not source[-1][1] or source[-1][1].startswith(CELL_TAG)):
        source.pop()   # past the end of the file, or the log folder the kernel added to the cell
    return {"file": display_name(path), "path": path, "line": line, "function": frame.f_code.co_name,
            "source": source}


def _same_file(path: str, file: str) -> bool:
    return is_cell(path) if file == "cell" else path == file or os.path.realpath(path) == file


def _more_of_the_cell(frame) -> bool:
    """Code follows the line ``frame`` is at, in its cell (not only blank lines and comments)."""
    lines = linecache.getlines(frame.f_code.co_filename, frame.f_globals)
    return any(line.strip() and not line.strip().startswith("#") for line in lines[frame.f_lineno:])


def _answer(waiters: list, reply: dict) -> None:
    for future in waiters:
        try:
            future.set_result(dict(reply))
        except concurrent.futures.InvalidStateError:   # its request gave up waiting
            pass
