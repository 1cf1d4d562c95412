"""A number as JSON gives it, made safe to compute with (pure).

json reads Infinity, NaN and ints of any size (up to 4300 digits): ``math.isfinite(10**400)``
and ``float(10**400)`` raise OverflowError, and NaN compares False with everything. Every reader
that takes a number from a file or a message asks here: an int is compared, never converted.
"""
from __future__ import annotations

import math

LIMIT = 2 ** 63   # past this no count, size, time or reading of ours is real


def number(value, limit: float = LIMIT):
    """``value`` when it is a finite number within ±``limit`` (an int or a float, as it came; a
    bool is no number), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if -limit < value < limit else None
