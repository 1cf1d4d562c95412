"""What a host's probe answer must hold before the checks read it (pure).

A host answers with what JSON allows, and json reads more than the probe writes: Infinity, NaN,
ints of any size, any type where a number, a text or an object is expected (another version's
probe, a shell profile that printed JSON, a hand). The checks compare, sort, hash and format
these values; ``answer_problem`` names the first one they could not take, and that host's answer
is then one "bad answer" (``doctor/collect``), never a traceback from inside a check.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

STR = "a string"
TEXT = "a string or null"
SCALAR = "a string, a number, a bool or null"
SIZE = "a count, a word or null"
_LIMIT = 2 ** 63   # a size or a time past this is no host's; a float cannot even hold 10**400


class Obj(NamedTuple):
    """An object whose ``keys`` have their own shapes and its other keys ``other``'s (None: any)."""

    keys: dict
    other: Any = None
    null: bool = True   # null stands for it (the checks read it with ``or {}``)


class ListOf(NamedTuple):
    item: Any
    null: bool = True


_GPU = Obj({"name": TEXT}, SCALAR, null=False)
_PACKAGE = Obj({"error": TEXT, "file": TEXT, "extra": Obj({}, SCALAR)}, SCALAR, null=False)
SHAPE = Obj({
    "problems": ListOf(STR), "time": SCALAR, "xid_log": ListOf(STR),
    "python": Obj({}, SCALAR, null=False), "env": Obj({}, SCALAR), "packages": Obj({}, _PACKAGE),
    "gpus": Obj({"gpus": ListOf(_GPU), "affinity": Obj({"far": TEXT}), "count": SCALAR, "error": SCALAR,
                 "driver": SCALAR}),
    "host": Obj({"shm": Obj({"total": SIZE}), "disk": Obj({"free": SIZE, "error": SCALAR, "path": SCALAR}),
                 "memlock": SIZE, "nofile": SIZE, "ib": ListOf(Obj({}, SCALAR, null=False))}),
}, null=False)


def _where(where: str, step: Any) -> str:
    if isinstance(step, int):
        return f"{where}[{step}]"
    name = step if step.isidentifier() else repr(step)
    return f"{where}.{name}" if where else name


def _leaf(value: Any, kind: str) -> bool:
    if kind == STR:
        return isinstance(value, str)
    if kind == TEXT:
        return value is None or isinstance(value, str)
    if kind == SIZE:
        return value is None or isinstance(value, str) or (
            isinstance(value, int) and not isinstance(value, bool) and value >= 0)
    return not isinstance(value, (list, dict))


def _mismatch(value: Any, shape: Any, where: str) -> str | None:
    """Where ``value`` is not of ``shape``, and what it is instead; None when it is."""
    if isinstance(shape, (Obj, ListOf)):
        if value is None and shape.null:
            return None
        kind = dict if isinstance(shape, Obj) else list
        if not isinstance(value, kind):
            return f"{where} is {value!r:.40}, not {'an object' if kind is dict else 'a list'}"
        steps = value.items() if kind is dict else enumerate(value)
        for step, item in steps:
            inner = shape.keys.get(step, shape.other) if kind is dict else shape.item
            found = None if inner is None else _mismatch(item, inner, _where(where, step))
            if found:
                return found
        return None
    return None if _leaf(value, shape) else f"{where} is {value!r:.40}, not {shape}"


def _odd_number(value: Any, where: str) -> str | None:
    """The first number no probe writes: not finite, or past 2**63 either way."""
    if isinstance(value, (list, dict)):
        steps = value.items() if isinstance(value, dict) else enumerate(value)
        return next(filter(None, (_odd_number(item, _where(where, step)) for step, item in steps)), None)
    if isinstance(value, float) and not math.isfinite(value) or \
            isinstance(value, int) and abs(value) >= _LIMIT:
        return f"{where} is {value!r:.40}, out of range"
    return None


def answer_problem(answer: dict) -> str | None:
    """What in a probe's answer the checks cannot read ("gpus.gpus[0].mig is [], not ..."), or None."""
    try:
        return _odd_number(answer, "") or _mismatch(answer, SHAPE, "")
    except RecursionError:   # json reads ~1000 levels; these walks take two frames a level
        return "the answer is nested too deeply"
