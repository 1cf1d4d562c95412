"""Summaries made on a rank, with real torch and numpy values, and the follow-ups that explain
a difference (values/rank/compare), run here in one process on two kept values."""
from __future__ import annotations

import collections
import math
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.values.rank import summaries, transfer, compare as values


def summary(value):
    return summaries.summarize(value)[0]


def test_equal_bytes_give_equal_digests_and_one_element_changes_them():
    a = {f"layer{i}.weight": torch.randn(300, 300) for i in range(3)}
    b = {k: v.clone() for k, v in a.items()}
    assert summary(a)["digest"] == summary(b)["digest"]
    b["layer1.weight"][7, 9] += 1e-3
    assert summary(a)["digest"] != summary(b)["digest"]
    assert summary(a)["structure"] == summary(b)["structure"]


def test_a_state_dict_summary_is_small_and_says_what_it_holds():
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(60)])
    found = summary(model.state_dict())
    assert found["counts"] == {"tensor": 120} and found["dtypes"] == ["float32"] and found["finite"] is True
    assert found["type"] == "collections.OrderedDict" and found["leaf"] is None
    assert len(pickle.dumps(found)) < 600


def test_nan_and_inf_are_not_finite_and_integers_have_no_finiteness():
    assert summary(torch.tensor([1.0, float("nan")]))["finite"] is False
    assert summary(np.array([np.inf]))["finite"] is False
    assert summary(torch.arange(5))["finite"] is None
    assert summary({"a": torch.ones(2), "b": float("inf")})["finite"] is False


@pytest.mark.parametrize("make", [
    lambda: torch.randn(64, 32).t(),                      # not contiguous
    lambda: torch.randn(5, 7).to(torch.bfloat16),         # no numpy dtype
    lambda: torch.randn(3, 3, dtype=torch.complex64).conj(),
    lambda: torch.tensor(3.5),                            # 0-d
    lambda: torch.empty(0, 4),
    lambda: np.asfortranarray(np.random.rand(6, 5)),
    lambda: np.arange(10, dtype=np.int16)[::2],
])
def test_odd_layouts_hash_by_their_values(make):
    value = make()
    copy = value.clone() if isinstance(value, torch.Tensor) else value.copy()
    assert summary(value)["digest"] == summary(copy)["digest"]
    assert summary(value)["leaf"]["kind"] in ("tensor", "array")


def test_tensors_without_plain_bytes_and_other_objects_compare_by_repr():
    sparse = torch.eye(3).to_sparse()
    assert summary(sparse)["leaf"]["kind"] == "object"
    first, second = object(), object()
    assert summary(first)["digest"] != summary(second)["digest"]    # their reprs (addresses) differ
    assert summary("abc")["leaf"]["repr"] == "'abc'"
    assert summary(np.array(["a", None], dtype=object))["leaf"]["kind"] == "object"


def test_nested_containers_cycles_and_too_many_leaves():
    nested = {"a": [1, 2.5, "x"], "b": (None, np.float32(3))}
    leaves = summaries.summarize(nested)[1]
    assert [leaf.path for leaf in leaves] == ["a[0]", "a[1]", "a[2]", "b[0]", "b[1]"]
    assert [leaf.summary["kind"] for leaf in leaves] == ["number", "number", "object", "object", "number"]
    looped = [1]
    looped.append(looped)
    assert summary(looped)["leaves"] == 2
    huge = list(range(summaries.MAX_LEAVES + 1))
    assert summary(huge)["leaf"]["kind"] == "object"


@settings(max_examples=50, deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=12))
def test_equal_plain_values_have_equal_digests(value):
    assert summary(value)["digest"] == summary(pickle.loads(pickle.dumps(value)))["digest"]


def test_chunk_digests_find_the_one_chunk_that_differs():
    a = torch.zeros(3 * summaries.CHUNK // 4)          # three chunks of float32
    b = a.clone()
    b[summaries.CHUNK // 4 + 5] = 1.0                  # in the second chunk
    leaf_a, leaf_b = summaries.summarize(a)[1][0], summaries.summarize(b)[1][0]
    from mlp_magic.values.pure.compare import differing_slots
    assert differing_slots(leaf_a.chunks, leaf_b.chunks, summaries.WIDTH) == [1]


def keep(token, value):
    values._kept[token] = (value, summaries.summarize(value)[1])


def test_the_follow_ups_find_the_key_the_piece_and_the_largest_difference():
    torch.manual_seed(0)
    majority = collections.OrderedDict((f"l{i}.w", torch.randn(700, 700)) for i in range(4))
    minority = collections.OrderedDict((k, v.clone()) for k, v in majority.items())
    minority["l2.w"][600, 3] -= 1e-3
    keep("major", majority)
    keep("minor", minority)
    try:
        found = values.differences("minor", values.leaf_digests("major", False))
        assert found["differing"] == 1 and found["missing"] == []
        (ref_index, own_index, own, own_chunks), = found["listed"]
        assert (ref_index, own_index, own["path"]) == (2, 2, "l2.w")
        ref, pieces, differing = values.leaf_details("major", {"k": (2, own_chunks)})["k"]
        assert ref["path"] == "l2.w" and differing == 1 and len(pieces) == 1
        sent, complete = values.differing_pieces("minor", {2: pieces}, budget=1 << 20)
        assert complete and [len(data) for _, data in sent[2]] == [values.PIECE]   # 1 KiB moves
        largest, flat, note = values.max_differences("major", {"k": (2, sent[2])})["k"]
        assert largest == pytest.approx(1e-3, rel=1e-3) and flat == 600 * 700 + 3 and note == ""
        assert values.differing_pieces("minor", {2: pieces}, budget=10) == ({2: []}, False)
    finally:
        values.release()


def test_paths_align_when_the_structures_differ():
    keep("major", {"a": torch.ones(3), "b": torch.ones(3), "c": 1})
    keep("minor", {"a": torch.ones(3), "c": 2, "d": torch.zeros(1)})
    try:
        found = values.differences("minor", values.leaf_digests("major", True))
        assert [(r, o, s["path"]) for r, o, s, _ in found["listed"]] == [(2, 1, "c"), (None, 2, "d")]
        assert found["missing"] == ["b"] and found["differing"] == 3
    finally:
        values.release()


def test_nan_against_a_number_is_noted_and_equal_nans_are_not():
    keep("major", np.array([1.0, np.nan, np.nan, 4.0]))
    keep("minor", np.array([1.5, np.nan, 3.0, 4.0]))
    try:
        _, pieces, _ = values.leaf_details("major", {0: (0, values._kept["minor"][1][0].chunks)})[0]
        sent, _ = values.differing_pieces("minor", {0: pieces}, budget=1 << 20)
        largest, flat, note = values.max_differences("major", {0: (0, sent[0])})[0]
        assert (largest, flat) == (0.5, 0) and note == "and nan where the other has a number"
    finally:
        values.release()


def test_a_forgotten_value_is_an_error_not_a_wrong_answer():
    with pytest.raises(RuntimeError, match="gone from this rank"):
        values.leaf_digests("never-kept", False)


def test_pull_sizes_and_cpu_copies():
    value = {"w": torch.ones(10), "n": [np.zeros(4), 3], "t": (torch.zeros(2),)}
    assert transfer.data_bytes(value) == 40 + 32 + 8
    assert transfer.on_cpu(value) is value                  # nothing to move: the same object
    named = collections.namedtuple("Pair", "a b")(torch.ones(1), 2)
    assert transfer.on_cpu(named) is named


def test_nan_alone_is_the_difference_where_it_is():
    keep("major", torch.tensor([1.0, 2.0, 3.0]))
    keep("minor", torch.tensor([1.0, 2.0, float("nan")]))
    try:
        _, pieces, _ = values.leaf_details("major", {0: (0, values._kept["minor"][1][0].chunks)})[0]
        sent, _ = values.differing_pieces("minor", {0: pieces}, budget=1 << 20)
        largest, flat, note = values.max_differences("major", {0: (0, sent[0])})[0]
        assert math.isnan(largest) and flat == 2 and note == "nan where the other has a number"
    finally:
        values.release()


def test_a_module_or_optimizer_is_compared_by_its_weights_not_its_repr():
    torch.manual_seed(0)
    a = torch.nn.Linear(4, 4)
    torch.manual_seed(0)
    b = torch.nn.Linear(4, 4)
    torch.manual_seed(1)
    c = torch.nn.Linear(4, 4)
    assert repr(a) == repr(c)   # the repr shows only the structure
    assert summary(a)["digest"] == summary(b)["digest"] != summary(c)["digest"]
    assert summary(a)["counts"] == {"tensor": 2}
    with torch.no_grad():
        b.weight[1, 2] += 1e-3
    assert summary(a)["digest"] != summary(b)["digest"]
    step = torch.optim.SGD(a.parameters(), lr=0.1, momentum=0.9)
    other = torch.optim.SGD(a.parameters(), lr=0.2, momentum=0.9)
    assert summary(step)["digest"] != summary(other)["digest"]


def test_an_object_array_is_compared_element_by_element():
    a = np.array(list(range(5000)), dtype=object)
    b = a.copy()
    b[2500] = -1   # in the middle that numpy's repr elides
    assert summary(a)["digest"] != summary(b)["digest"]
    assert summary(a)["digest"] == summary(a.copy())["digest"]


def test_a_pulled_module_counts_its_weights_and_one_off_the_cpu_is_refused():
    model = torch.nn.Linear(1000, 1000)
    assert transfer.data_bytes(model) == 1000 * 1000 * 4 + 1000 * 4   # checked against the cap first
    assert transfer.data_bytes({"model": model}) == transfer.data_bytes(model)
    assert transfer._module_device(model) is None
    # a device other than the CPU (here "meta": no GPU on this machine) would come back as such
    assert transfer._module_device(torch.nn.Linear(4, 4, device="meta")) == "meta"


@pytest.mark.parametrize("make", [
    lambda xs: np.array(xs, dtype=np.int64),
    lambda xs: torch.tensor(xs, dtype=torch.int64),
])
def test_integer_differences_are_exact_beyond_two_to_the_53(make):
    """float64 would round: 2**62 + 1 against 2**62 was 'no difference', and extremes overflowed."""
    big = 2 ** 62
    keep("major", make([big, -(2 ** 63), 7]))
    keep("minor", make([big + 1, 2 ** 63 - 1, 7]))
    try:
        _, pieces, _ = values.leaf_details("major", {0: (0, values._kept["minor"][1][0].chunks)})[0]
        sent, _ = values.differing_pieces("minor", {0: pieces}, budget=1 << 20)
        largest, flat, note = values.max_differences("major", {0: (0, sent[0])})[0]
        assert (largest, flat, note) == (2 ** 64 - 1, 1, "")
        assert isinstance(largest, int)
    finally:
        values.release()


def test_unsigned_and_boolean_differences():
    keep("major", np.array([0, 2 ** 64 - 1], dtype=np.uint64))
    keep("minor", np.array([3, 0], dtype=np.uint64))
    try:
        _, pieces, _ = values.leaf_details("major", {0: (0, values._kept["minor"][1][0].chunks)})[0]
        sent, _ = values.differing_pieces("minor", {0: pieces}, budget=1 << 20)
        assert values.max_differences("major", {0: (0, sent[0])})[0] == (2 ** 64 - 1, 1, "")
    finally:
        values.release()
    keep("major", np.array([True, False, True]))
    keep("minor", np.array([True, True, True]))
    try:
        _, pieces, _ = values.leaf_details("major", {0: (0, values._kept["minor"][1][0].chunks)})[0]
        sent, _ = values.differing_pieces("minor", {0: pieces}, budget=1 << 20)
        assert values.max_differences("major", {0: (0, sent[0])})[0] == (1, 1, "")
    finally:
        values.release()
