"""The kernel's garbage collector during a cell: look at what the cell made, not the whole heap.

A cell on many ranks makes thousands of objects in the kernel (futures, message dicts, results),
enough for Python's collector to run its full, oldest-generation pass now and then, and that pass
walks every object the notebook holds: IPython, the libraries, the user's own data. Its cost
grows with the user's heap, not with the cell (docs/performance.md). ``gc.freeze()`` sets every
object alive at the cell's start aside for the cell's duration (no copy: one list moved),
``gc.unfreeze()`` puts them back after; cyclic garbage among them is collected then instead of
during the cell.
"""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def cell_objects_only():
    """Leave the collector alone when the user has frozen objects or turned it off."""
    if not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
