"""Hostile JSON for the readers' fuzzers: a valid document with a few of its values swapped for
ones that JSON allows and a careless reader chokes on (Infinity, NaN, ints too large for C or
negative, a pid of 0, -1 or 1, an int no float holds (10**400), the wrong type). Random bytes
rarely get past the JSON parser; these reach the reader's own checks, where an `int(inf)`,
`float(10**400)` or `os.kill(2**63, 0)` raises OverflowError."""
from __future__ import annotations

import copy
import json

from hypothesis import strategies as st

HOSTILE_VALUES = (
    float("inf"), float("-inf"), float("nan"), 1e308, -0.0, 0.5,
    2**31, 2**63, -2**63 - 1, 10**40, 10**400, -1, 0, 1,
    True, False, None, "", "12", "\x00", "x" * 300,
    [], [None], {}, {"": None},
)
# Keys that look like numbers to str.isdigit() or a person, and not to int(): "²" isdigit() and
# int("²") raises ValueError.
HOSTILE_KEYS = ("", "-1", "²", "٣", "01", " 1", "1e3", "0x1", "9" * 30)


def paths(doc, here: tuple = ()) -> list:
    """Every place in a document: each key of a dict and each item of a list, nested."""
    found = [here] if here else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += paths(value, here + (key,))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found += paths(value, here + (index,))
    return found


def replaced(doc, path: tuple, value):
    """A copy of doc with the value at path replaced."""
    changed = copy.deepcopy(doc)
    into = changed
    for step in path[:-1]:
        into = into[step]
    into[path[-1]] = value
    return changed


def renamed(doc, path: tuple, key: str):
    """A copy of doc with the dict key at path renamed (doc unchanged where path ends in a list)."""
    changed = copy.deepcopy(doc)
    into = changed
    for step in path[:-1]:
        into = into[step]
    if isinstance(into, dict):
        into[key] = into.pop(path[-1])
    return changed


@st.composite
def hostile(draw, doc, changes: int = 3):
    """doc with 1 to `changes` of its values (leaves or whole branches) made hostile, or their
    keys renamed to hostile ones."""
    places = paths(doc)
    for _ in range(draw(st.integers(1, changes))):
        place = draw(st.sampled_from(places))
        try:
            if draw(st.integers(0, 3)) == 0:
                doc = renamed(doc, place, draw(st.sampled_from(HOSTILE_KEYS)))
            else:
                doc = replaced(doc, place, draw(st.sampled_from(HOSTILE_VALUES)))
        except (KeyError, IndexError, TypeError):   # an earlier change removed its parent
            continue
    return doc


def dumps(doc) -> str:
    """As Python's json writes it, Infinity and NaN included (json.loads reads them back)."""
    return json.dumps(doc, allow_nan=True)
