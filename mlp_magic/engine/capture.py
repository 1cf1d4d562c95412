"""Every byte a rank writes during a cell goes to its log; at most a display cap to the notebook.

Per cell, the client appends a trailing comment ``# mlp_magic cell: <log dir>`` to the code
(a comment changes neither line numbers nor the value of the last expression). The
``pre_run_cell`` hook sees it and tees sys.stdout/sys.stderr into ``<log dir>/rank<N>.stdout``
and ``.stderr``, forwarding at most ``display_cap`` bytes per stream to the notebook. What is
written below Python, to fd 1 and 2 (C code such as NCCL's logs, child processes, ``!cmd``),
is read by engine/fd_watch.py and routed through the same tee, drained at the cell's end.
So every byte is on disk, and a rank that floods cannot flood the client's memory.
"""
from __future__ import annotations

import os
import socket
import sys
import threading
import time
import traceback

from mlp_magic.engine.fd_watch import take_over
from mlp_magic.engine.identity import stacks_path
from mlp_magic.engine.private_files import open_private, private_dirs, private_file

CELL_TAG = "# mlp_magic cell: "
FLUSH_SECONDS = 0.5
# This engine's cell hooks (module state, kept out of the user's namespace).
_STATE: dict = {}


def own_log_root() -> str:
    """This host's own log root, where a rank logs when the client's path cannot be written."""
    return os.path.join(os.path.expanduser("~"), ".mlp_magic", "logs")


def open_rank_log(path: str):
    """(file, path) for a rank's log: the path the client asked for, else the same cell folder
    under this host's own ~/.mlp_magic/logs (another user, another $HOME), else (None, reason).
    Logging must never raise into the user's print(). Folders 0700, the file 0600
    (engine/private_files): a log holds the cell's code and output."""
    cell, name = os.path.basename(os.path.dirname(path)), os.path.basename(path)
    own_root = own_log_root()
    reason = ""
    for candidate in (path, os.path.join(own_root, cell, name)):
        try:
            private_dirs(os.path.dirname(candidate))
            return open_private(candidate, "w", encoding="utf-8", errors="backslashreplace"), candidate
        except OSError as err:
            reason = f"{candidate}: {err.strerror or err}"
    return None, reason


class TeeStream:
    """A text stream: everything to a log file, up to ``cap`` characters to the notebook.

    The log file is created on the first write, so a silent cell costs no file at all. If it
    cannot be written, the rank keeps printing (to the notebook only) and says why at the end.
    """

    def __init__(self, forward, log_path: str, cap: int):
        self._forward = forward
        self._forward_write = forward.write
        self._lock = threading.Lock()   # the cell's thread and the fd watcher (engine/fd_watch) both write
        self.log_path = log_path
        self.log_error = ""
        self._log = None
        self._opened = False
        self._cap = cap
        self.forwarded = 0
        self.total = 0
        self._last_flush = time.monotonic()

    def _write_log(self, text: str) -> None:
        if not self._opened:
            self._opened = True
            self._log, where = open_rank_log(self.log_path)
            if self._log is None:
                self.log_error = where
            else:
                self.log_path = where
        if self._log is None:
            return
        try:
            self._log.write(text)
            now = time.monotonic()
            if now - self._last_flush > FLUSH_SECONDS:
                self._log.flush()
                self._last_flush = now
        except OSError as err:  # disk full...: stop logging, keep the rank running
            self.log_error = f"{self.log_path}: {err.strerror or err}"
            self._log = None

    def write(self, text: str) -> int:
        with self._lock:
            self._write_log(text)
            self.total += len(text)
            room = self._cap - self.forwarded
            piece = text if len(text) <= room else text[:max(room, 0)]
            self.forwarded += len(piece)
        if piece:
            self._forward_write(piece)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._log is not None:
            try:
                self._log.flush()
            except OSError:
                pass
        self._forward.flush()

    def close_log(self) -> None:
        with self._lock:
            log, self._log = self._log, None
        if log is not None:
            try:
                log.close()
            except OSError as err:   # the buffered rest: a full disk often shows only here
                self.log_error = f"{self.log_path}: {err.strerror or err}"

    @property
    def capped(self) -> int:
        return self.total - self.forwarded

    def __getattr__(self, name):
        # encoding, isatty, fileno, ...: behave as the stream we replaced.
        return getattr(self._forward, name)


def cell_log_dir(raw_cell: str) -> str | None:
    tail = raw_cell.rstrip().rsplit("\n", 1)[-1]
    return tail[len(CELL_TAG):].strip() if tail.startswith(CELL_TAG) else None


class CellCapture:
    """The pre/post hooks: tee the streams of one tagged cell into its log directory."""

    def __init__(self, rank: int, cap: int):
        self.rank = rank
        self.cap = cap
        self.active = None  # (log_dir, saved streams, tees)

    def pre_run_cell(self, info) -> None:
        log_dir = cell_log_dir(getattr(info, "raw_cell", "") or "")
        if not log_dir or self.active:
            return
        saved = (sys.stdout, sys.stderr)
        tees = tuple(TeeStream(stream, os.path.join(log_dir, f"rank{self.rank}.{name}"), self.cap)
                     for stream, name in zip(saved, ("stdout", "stderr")))
        sys.stdout, sys.stderr = tees
        self.active = (log_dir, saved, tees)

    def post_run_cell(self, result) -> None:
        if not self.active:
            return
        log_dir, saved, tees = self.active
        for watcher in _STATE.get("fd_watchers", ()):
            watcher.drain()   # the cell's last fd output still goes to its tees
        self.active = None
        sys.stdout, sys.stderr = saved
        error = getattr(result, "error_in_exec", None)
        if error is not None:
            handle, _ = open_rank_log(os.path.join(log_dir, f"rank{self.rank}.error"))
            if handle is not None:
                with handle:
                    handle.write("".join(traceback.format_exception(type(error), error, error.__traceback__)))
        for tee, stream in zip(tees, saved):
            tee.close_log()
            if not (tee.capped or tee.log_error):
                continue   # the common case: no note, no flush (ipykernel's waits on its IOPub thread)
            from mlp_magic.output.pure.capped import cap_note   # rarely needed: not in every engine

            stream.write(cap_note(tee.capped, socket.gethostname(), tee.log_path, tee.log_error))
            stream.flush()


def _fd_route(stream, index: int):
    """Where fd 1 or 2 output goes: while a tagged cell runs, its tee (rank log, display cap);
    otherwise the engine's stream, as ipykernel would."""
    plain = stream.write

    def route(text: str) -> None:
        capture = _STATE.get("capture")
        active = capture.active if capture is not None else None
        (active[2][index].write if active else plain)(text)
    return route


def install_capture(shell, rank: int, display_cap: int) -> None:
    """Tee every tagged cell's streams (and fd 1/2 output) into its log folder, from now on.
    The stack dump's file is made here too, private, before engine/bootstrap opens it by name:
    a dump names the user's files and functions."""
    try:
        private_file(stacks_path())
    except OSError:
        pass   # bootstrap's own open then says why
    if "capture" in _STATE:  # bootstrap again (restart of the hooks): replace, never stack
        shell.events.unregister("pre_run_cell", _STATE["capture"].pre_run_cell)
        shell.events.unregister("post_run_cell", _STATE["capture"].post_run_cell)
    capture = _STATE["capture"] = CellCapture(rank, display_cap)
    watchers = [take_over(stream, _fd_route(stream, index))
                for index, stream in enumerate((sys.stdout, sys.stderr))]
    _STATE["fd_watchers"] = [watcher for watcher in watchers if watcher is not None]
    shell.events.register("pre_run_cell", capture.pre_run_cell)
    shell.events.register("post_run_cell", capture.post_run_cell)
