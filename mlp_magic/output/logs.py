"""Per-cell log directories: every byte every rank wrote, whatever the display showed.

Layout: ``<root>/<date>-<time>-<kernel pid>-<cell n>/rank<N>.stdout|.stderr|.error`` (written
by each rank as it runs, on the rank's own host) plus ``summary.json`` (written here, after the
cell: status, host and duration of every rank).

Retention: cell directories older than ``$MLP_MAGIC_LOG_KEEP_DAYS`` days (default 30; 0 keeps
everything) are removed from the log root, once per kernel on its first cell, and once per World
start on every host by its first engine (each host keeps its own logs). Only directories named
as cells are named here are touched, and only by their age (name and last change both older).

Every folder made for a cell is 0700 and every file 0600, whatever the umask (engine/private_files):
they hold every cell's code and output.
"""
from __future__ import annotations

import atexit
import itertools
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

from mlp_magic import config
from mlp_magic.machine.user_files import shown
from mlp_magic.engine.private_files import open_private, private_dirs
from mlp_magic.errors import MlpMagicError
from mlp_magic.output.pure.retention import STAMP
from mlp_magic.output.rank.retention import prune

_pruned_roots: set = set()
_cell_numbers = itertools.count(1)
# Summaries are written off the cell's critical path, in order, by one thread; the pool is
# drained at interpreter exit so none is lost.
_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlp-magic-logs")
atexit.register(_writer.shutdown, wait=True)


def check_root(root: str | None) -> None:
    """``--log-dir``: a folder this user can write, made if missing; else one line naming it,
    before anything runs (the ranks would put the logs elsewhere, and the footer lie)."""
    if root is None:
        return
    path = os.path.abspath(os.path.expanduser(root))
    try:
        private_dirs(path)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable by this user")
    except (OSError, ValueError) as err:   # ValueError: a NUL byte
        why = getattr(err, "strerror", None) or str(err)
        if isinstance(err, (FileExistsError, NotADirectoryError)) or os.path.isfile(path):
            why = "a file, not a folder" if os.path.isfile(path) else "a file is in the way"
        raise MlpMagicError(f"--log-dir {shown(root)}: cannot keep the logs there: {why}") from None


def new_cell_dir(root: str | None = None) -> str:
    """A fresh cell directory's path; it is created by whoever writes in it first. The first
    call of this kernel also has old cells removed from the log root (in the background)."""
    check_root(root)
    days = config.log_keep_days()
    default_root = config.log_root()
    if default_root not in _pruned_roots:
        _pruned_roots.add(default_root)
        if days:
            _writer.submit(prune, default_root, days)
    name = f"{time.strftime(STAMP)}-{os.getpid()}-{next(_cell_numbers):04d}"
    return os.path.abspath(os.path.join(config.log_root(root and os.path.expanduser(root)), name))


def written(timeout: float = 30.0) -> None:
    """Wait until every log write queued so far (summaries, streams, stacks) is on disk."""
    _writer.submit(lambda: None).result(timeout)


def write_summary(cell_dir: str, code: str, results: list, extra: dict | None = None):
    """Write ``summary.json`` in the background; returns the Future (tests wait on it)."""
    return _writer.submit(_write_summary, cell_dir, code, results, extra)


_SUMMARY_FIELDS = ("rank", "host", "status", "duration", "truncated")


def _write_summary(cell_dir: str, code: str, results: list, extra: dict | None = None) -> None:
    private_dirs(cell_dir)
    ranks = []
    for result in results:  # plain fields only (no deep copy of outputs): cheap on the GIL
        record = {name: getattr(result, name) for name in _SUMMARY_FIELDS}
        if result.error:
            record["error"] = result.error
        ranks.append(record)
    summary = {"code": code, "ranks": ranks, **(extra or {})}
    with open_private(os.path.join(cell_dir, "summary.json")) as handle:
        handle.write(json.dumps(summary, default=str))


def write_missing_streams(cell_dir: str, results: list) -> None:
    """Ranks that never ran the capture hook (died, unreachable) still leave what we received."""
    _writer.submit(_write_missing_streams, cell_dir, list(results))


def _write_missing_streams(cell_dir: str, results: list) -> None:
    private_dirs(cell_dir)
    for result in results:
        for stream in ("stdout", "stderr"):
            path = os.path.join(cell_dir, f"rank{result.rank}.{stream}")
            text = getattr(result, stream)
            if text and not os.path.exists(path):
                with open_private(path, "w", encoding="utf-8", errors="backslashreplace") as handle:
                    handle.write(text)


def write_stacks(cell_dir: str, dumps: dict):
    """Every rank's full faulthandler dump (all threads), next to its output."""
    return _writer.submit(_write_stacks, cell_dir, dict(dumps))


def _write_stacks(cell_dir: str, dumps: dict) -> None:
    folder = os.path.join(cell_dir, "stacks")
    private_dirs(folder)
    for rank, text in dumps.items():
        with open_private(os.path.join(folder, f"rank{rank}.txt")) as handle:
            handle.write(text)
