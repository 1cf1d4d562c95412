"""Remove a log root's expired cell folders; run by the kernel and by each host's first engine.

Each host keeps its own logs (ranks write theirs on their own host), so each prunes its own copy
of the log root, once per World start, in the background. Which folders go is the pure rule of
``output/pure/retention``; this module only lists, checks and removes.
"""
from __future__ import annotations

import os
import stat
import threading
import time

from mlp_magic.output.pure.retention import STAMP, expired_cells


def local_seconds(stamp: str) -> float:
    """A cell name's start (``STAMP``, local time) as a Unix time; ValueError or OverflowError
    when it names no time."""
    return time.mktime(time.strptime(stamp, STAMP))


def prune(root: str, days: float, now: float | None = None) -> list:
    """Remove the expired cell directories under ``root``; returns their names. Never raises:
    retention must not break a cell or an engine's start."""
    import shutil

    try:
        names = os.listdir(root)
    except OSError:
        return []
    entries = []
    for name in names:
        try:
            info = os.lstat(os.path.join(root, name))
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):   # a link is never followed, never removed
            entries.append((name, info.st_mtime))
    removed = expired_cells(entries, time.time() if now is None else now, days, local_seconds)
    for name in removed:
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    return removed


def prune_in_background(roots, days: float) -> None:
    """``prune`` each root (duplicates once) in a daemon thread: never delays the caller."""
    unique = list(dict.fromkeys(roots))
    threading.Thread(target=lambda: [prune(root, days) for root in unique],
                     name="mlp-magic-log-retention", daemon=True).start()
