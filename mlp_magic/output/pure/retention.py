"""Which cell log folders have expired (pure): by the date in their name and their last change.

Cell folders are named ``<date>-<time>-<kernel pid>-<cell n>`` (``world.logs.new_cell_dir``);
nothing else under a log root is ever chosen. Removing them is ``engine.retention.prune``'s job.
"""
from __future__ import annotations

import re
import time

CELL_NAME = re.compile(r"^(\d{8}-\d{6})-\d+-\d{4,}$")


def expired_cells(entries, now: float, days: float) -> list:
    """Names of the cell directories to remove: ``entries`` are (name, last change as a Unix
    time); a cell goes when both its name's start time and its last change are more than
    ``days`` ago. Names not made by ``new_cell_dir`` are never chosen. Pure."""
    limit = now - days * 86400
    expired = []
    for name, changed in entries:
        found = CELL_NAME.match(name)
        if not found or changed >= limit:
            continue
        try:   # the name is local time
            started = time.mktime(time.strptime(found.group(1), "%Y%m%d-%H%M%S"))
        except (ValueError, OverflowError):
            continue
        if started < limit:
            expired.append(name)
    return sorted(expired)
