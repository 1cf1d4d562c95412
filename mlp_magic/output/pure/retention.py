"""Which cell log folders have expired (pure): by the date in their name and their last change.

Cell folders are named ``<date>-<time>-<kernel pid>-<cell n>`` (``output/logs.new_cell_dir``);
nothing else under a log root is ever chosen. Removing them is ``output/rank/retention.prune``'s job.
"""
from __future__ import annotations

import re

CELL_NAME = re.compile(r"^(\d{8}-\d{6})-\d+-\d{4,}$")
STAMP = "%Y%m%d-%H%M%S"   # a cell name's start, in the local time of the host that made it


def expired_cells(entries, now: float, days: float, seconds_of) -> list:
    """Names of the cell directories to remove: ``entries`` are (name, last change as a Unix
    time); a cell goes when both its name's start time and its last change are more than
    ``days`` ago. ``seconds_of(stamp)``: a name's ``STAMP`` as a Unix time (local time: the
    machine's timezone, output/rank/retention.local_seconds), ValueError or OverflowError for a
    stamp that names no time, whose cell is kept. Names not made by ``new_cell_dir`` are never
    chosen. Pure."""
    limit = now - days * 86400
    expired = []
    for name, changed in entries:
        found = CELL_NAME.match(name)
        if not found or changed >= limit:
            continue
        try:
            started = seconds_of(found.group(1))
        except (ValueError, OverflowError):
            continue
        if started < limit:
            expired.append(name)
    return sorted(expired)
