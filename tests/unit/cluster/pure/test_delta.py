"""cluster/pure/delta: the panel's deltas; applying diff(old, new) to old always gives new."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.cluster.pure.delta import apply, diff

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, width=32)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=400)
@given(json_values, json_values)
def test_applying_the_diff_gives_the_new_document(old, new):
    ops = diff(old, new)
    assert apply(old, ops) == new
    assert json.loads(json.dumps(ops)) == ops   # what the websocket carries


@given(json_values)
def test_equal_documents_have_no_operations(doc):
    assert diff(doc, json.loads(json.dumps(doc))) == []


@given(json_values, json_values)
def test_apply_leaves_the_old_document_alone(old, new):
    before = json.dumps(old)
    apply(old, diff(old, new))
    assert json.dumps(old) == before


def ranks(states):
    return {"worlds": [{"id": "w-1", "ranks": [{"rank": r, "state": s, "since": "t0"}
                                               for r, s in enumerate(states)]}]}


def test_one_rank_changing_is_one_small_operation():
    old, new = ranks(["busy"] * 512), ranks(["busy"] * 512)
    new["worlds"][0]["ranks"][17]["state"] = "idle"
    assert diff(old, new) == [["set", ["worlds", 0, "ranks", 17, "state"], "idle"]]


def test_a_mostly_changed_mapping_is_set_whole_and_a_resized_list_too():
    old, new = ranks(["busy"] * 4), ranks(["busy"] * 4)
    new["worlds"][0]["ranks"][2] = {"rank": 2, "state": "idle", "since": "t1"}
    assert diff(old, new) == [["set", ["worlds", 0, "ranks", 2], {"rank": 2, "state": "idle", "since": "t1"}]]
    assert diff(ranks(["busy"] * 4), ranks(["busy"] * 5))[0][:2] == ["set", ["worlds", 0, "ranks"]]


def test_removed_keys_are_deleted():
    assert diff({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 2}) == [["del", ["c"]]]


def test_bad_operations_are_refused():
    with pytest.raises(ValueError):
        apply({}, [["move", ["a"], 1]])
    with pytest.raises(ValueError):
        apply({}, [["del", []]])
