"""Plain value classes declared like dataclasses (mlp_magic.core.records)."""
from __future__ import annotations

import pickle

import pytest

from mlp_magic.core.records import Record, fresh


class Point(Record):
    x: int
    y: int = 0
    tags: list = fresh(list)


class Frozen(Record, frozen=True):
    name: str
    slots: int = 1


class Big(Record, frozen=True, eq=False):
    text: str


def test_construction_defaults_and_fresh_lists():
    assert (Point(1).x, Point(1).y, Point(1).tags) == (1, 0, [])
    assert Point(1, 2) == Point(y=2, x=1)
    first, second = Point(1), Point(1)
    first.tags.append("a")
    assert second.tags == []            # each instance has its own list
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=[])"
    assert Point(1) != Frozen("a") and Point(1) != (1, 0, [])


@pytest.mark.parametrize("call, message", [
    (lambda: Point(), "missing required argument 'x'"),
    (lambda: Point(1, 2, [], 4), "takes 3 arguments, 4 given"),
    (lambda: Point(1, z=3), "unexpected keyword argument 'z'"),
    (lambda: Point(1, x=3), "multiple values for argument 'x'"),
])
def test_bad_construction_is_a_type_error(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_mutable_records_are_unhashable():
    point = Point(1)
    point.y = 5
    assert point.y == 5
    with pytest.raises(TypeError):
        hash(point)


def test_frozen_records_are_immutable_and_hashable():
    host = Frozen("w0", 2)
    with pytest.raises(AttributeError, match="frozen"):
        host.slots = 3
    with pytest.raises(AttributeError, match="frozen"):
        del host.name
    assert {Frozen("w0", 2), Frozen("w0", 2), Frozen("w1")} == {host, Frozen("w1")}


def test_identity_records_compare_by_identity():
    a, b = Big("x"), Big("x")
    assert a != b and a == a and len({a, b}) == 2


def test_pickle_round_trip_keeps_values_and_frozenness():
    for value in (Point(1, 2, ["t"]), Frozen("w0", 4)):
        assert pickle.loads(pickle.dumps(value)) == value
    with pytest.raises(AttributeError):
        pickle.loads(pickle.dumps(Frozen("w0"))).name = "w1"
