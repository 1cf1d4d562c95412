"""What changed between two JSON documents, as a short list of operations, and how to apply it. Pure.

The panel's websocket carries the cluster document once, then only these operations: ``["set",
path, value]`` and ``["del", path]``, a path being the keys and list indices from the top
(``["worlds", 0, "ranks", 17, "state"]``). A list whose length changed is set whole (its items
have no identity to follow), and so is a mapping most of whose keys changed (one operation says
it shorter). Applying ``diff(old, new)`` to ``old`` gives ``new``; the panel's TypeScript does the
same (labextension/src/model/ops.ts).
"""
from __future__ import annotations

import copy
from typing import Any

SET, DEL = "set", "del"


def diff(old: Any, new: Any) -> list[list]:
    """The operations that turn ``old`` into ``new`` (none when they are equal)."""
    ops: list[list] = []
    _diff(old, new, [], ops)
    return ops


def _diff(old: Any, new: Any, path: list, ops: list[list]) -> None:
    if type(old) is not type(new):
        ops.append([SET, path, new])
    elif isinstance(new, dict):
        _diff_dict(old, new, path, ops)
    elif isinstance(new, list):
        if len(old) != len(new):
            ops.append([SET, path, new])
        else:
            for index, (a, b) in enumerate(zip(old, new)):
                if a != b:
                    _diff(a, b, path + [index], ops)
    elif old != new:
        ops.append([SET, path, new])


def _diff_dict(old: dict, new: dict, path: list, ops: list[list]) -> None:
    changed = [key for key in new if key not in old or old[key] != new[key]]
    gone = [key for key in old if key not in new]
    if path and len(changed) + len(gone) > max(1, len(new) // 2):
        ops.append([SET, path, new])   # most of it changed: say it whole
        return
    for key in gone:
        ops.append([DEL, path + [key]])
    for key in changed:
        value = new[key]
        if key in old and isinstance(value, (dict, list)):
            _diff(old[key], value, path + [key], ops)
        else:   # new, or a changed scalar (a rank's state: 512 a rebuild, no call each)
            ops.append([SET, path + [key], value])


def apply(doc: Any, ops: list[list]) -> Any:
    """``doc`` changed by ``ops`` (a new document: ``doc`` itself is left as it was)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        kind, path = op[0], op[1]
        if not path:
            if kind != SET:
                raise ValueError("cannot delete the whole document")
            doc = copy.deepcopy(op[2])
            continue
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if kind == SET:
            parent[path[-1]] = copy.deepcopy(op[2])
        elif kind == DEL:
            del parent[path[-1]]
        else:
            raise ValueError(f"unknown operation {kind!r}")
    return doc
