"""--compare's pure part: grouping summaries, aligning leaves, and the text a user reads."""
from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.values.pure.compare import (Comparison, ErrorGroup, LeafDiff, align_paths, describe,
                                           differing_slots, group_summaries, number_difference, render,
                                           unravel)
from mlp_magic.core.ranges import parse_ranks


def tensor_leaf(path="", digest="aa" * 8, shape=(4, 4), dtype="float32", finite=True, device="cpu"):
    return {"path": path, "kind": "tensor", "type": "torch.Tensor", "shape": list(shape), "dtype": dtype,
            "device": device, "finite": finite, "numel": math.prod(shape), "nbytes": 4 * math.prod(shape),
            "digest": digest}


def state_dict(digest="11" * 8, keys=120, structure="ss" * 8, finite=True):
    return {"type": "collections.OrderedDict", "digest": digest, "structure": structure, "leaves": keys,
            "counts": {"tensor": keys}, "dtypes": ["float32"], "devices": ["cuda"], "finite": finite,
            "numel": 25_000_000, "nbytes": 100_000_000, "leaf": None}


def one_leaf(leaf):
    return {"type": leaf["type"], "digest": leaf["digest"], "structure": "st", "leaves": 1,
            "counts": {leaf["kind"]: 1}, "dtypes": [], "devices": [], "finite": leaf.get("finite"),
            "numel": 0, "nbytes": leaf.get("nbytes", 0), "leaf": leaf}


SUMMARIES = st.dictionaries(
    st.integers(0, 600),
    st.one_of(st.sampled_from(["d1", "d2", "d3"]).map(lambda d: {"digest": d}),
              st.sampled_from(["NameError: x", "ValueError: y"]).map(lambda e: {"error": e})),
    min_size=1, max_size=60)


@given(SUMMARIES)
def test_grouping_keeps_every_rank_once_and_puts_the_majority_first(summaries):
    groups, errors = group_summaries(summaries)
    seen = [r for g in groups for r in g.ranks] + [r for e in errors for r in e.ranks]
    assert sorted(seen) == sorted(summaries)
    for group in groups:
        assert {summaries[r]["digest"] for r in group.ranks} == {group.summary["digest"]}
    assert len({g.summary["digest"] for g in groups}) == len(groups)
    assert [len(g.ranks) for g in groups] == sorted((len(g.ranks) for g in groups), reverse=True)
    for error in errors:
        assert {summaries[r]["error"] for r in error.ranks} == {error.message}


@given(SUMMARIES)
def test_the_text_names_every_rank_exactly_once(summaries):
    groups, errors = group_summaries({r: s if "error" in s else state_dict(s["digest"])
                                      for r, s in summaries.items()})
    text = render(Comparison("x", groups, errors))
    named = []
    for line in text.splitlines():
        if line.startswith("all "):
            named += list(summaries)
        elif line.startswith("rank"):
            spec = line.split(" ", 2)[1].rstrip(":")
            named += parse_ranks(spec)
    assert sorted(named) == sorted(summaries)


def test_the_common_case_is_one_line():
    comparison = Comparison("sd", *group_summaries({r: state_dict() for r in range(16)}))
    assert comparison.equal and comparison.differing_ranks == []
    assert comparison.text == ("all 16 ranks equal: collections.OrderedDict of 120 tensors, float32, cuda, "
                               "95.4 MiB, finite, checksum 11111111")
    assert repr(comparison) == comparison.text


def test_a_minority_names_its_ranks_keys_and_largest_difference():
    summaries = {r: state_dict() for r in range(16)}
    summaries[3] = summaries[11] = state_dict(digest="22" * 8)
    summaries[7] = {"error": "NameError: name 'model' is not defined"}
    groups, errors = group_summaries(summaries)
    minority = groups[1]
    minority.differing = 1
    minority.relayed = 1 << 20
    minority.diffs = [LeafDiff("fc.weight", tensor_leaf("fc.weight"), tensor_leaf("fc.weight", "bb" * 8),
                               max_diff=1e-3, at=(3, 17))]
    comparison = Comparison("sd", groups, errors)
    assert comparison.text.splitlines() == [
        "ranks 0-2,4-6,8-10,12-15 (13 of 16) equal: collections.OrderedDict of 120 tensors, float32, cuda, "
        "95.4 MiB, finite, checksum 11111111",
        "ranks 3,11 (2 of 16) differ in 1 of 120 keys (checksum 22222222; 1.0 MiB relayed)",
        "  fc.weight: max |diff| 0.001 at [3, 17]",
        "rank 7 (1 of 16): NameError: name 'model' is not defined",
    ]
    assert comparison.differing_ranks == [3, 7, 11] and not comparison.equal


def test_single_values_differ_in_one_line():
    same, other = tensor_leaf(), tensor_leaf(digest="cc" * 8, finite=False)
    groups, errors = group_summaries({0: one_leaf(same), 1: one_leaf(same), 2: one_leaf(other)})
    groups[1].diffs = [LeafDiff("", same, other, max_diff=float("nan"),
                                note="nan where the other has a number")]
    text = render(Comparison("t", groups, errors)).splitlines()
    assert text[0] == ("ranks 0-1 (2 of 3) equal: torch.Tensor [4, 4] float32 cpu, 64 B, finite, "
                       "checksum aaaaaaaa")
    assert text[1].startswith("rank 2 (1 of 3) differs: max |diff| nan, NOT finite here "
                              "(nan where the other has a number) (checksum cccccccc")


def test_numbers_and_objects_show_their_values():
    def number(value):
        return {"path": "", "kind": "number", "type": type(value).__name__, "value": value,
                "repr": repr(value), "finite": True, "digest": repr(value)}
    groups, errors = group_summaries({0: one_leaf(number(0.5)), 1: one_leaf(number(0.5)),
                                      2: one_leaf(number(0.75))})
    ref, own = groups[0].summary["leaf"], groups[1].summary["leaf"]
    groups[1].diffs = [LeafDiff("", ref, own, max_diff=number_difference(ref, own))]
    assert render(Comparison("x", groups, errors)).splitlines() == [
        "ranks 0-1 (2 of 3) equal: float 0.5, finite", "rank 2 (1 of 3) differs: 0.75 vs 0.5, |diff| 0.25"]
    assert number_difference({"kind": "number", "value": 1}, {"kind": "object", "repr": "'a'"}) is None


def test_shape_dtype_missing_and_extra_keys_are_said_as_such():
    ref = tensor_leaf("w", shape=(3, 4))
    cases = [
        (LeafDiff("w", ref, tensor_leaf("w", shape=(4, 3))), "shape [4, 3] vs [3, 4]"),
        (LeafDiff("w", ref, tensor_leaf("w", shape=(3, 4), dtype="float16")), "dtype float16 vs float32"),
        (LeafDiff("w", None, None), "missing here"),
        (LeafDiff("w", None, tensor_leaf("w")), "only here"),
    ]
    for diff, expected in cases:
        assert render_one(diff) == expected


def render_one(diff):
    from mlp_magic.values.pure.compare import diff_text

    return diff_text(diff)


def test_more_differing_keys_than_shown_are_counted():
    groups, _ = group_summaries({0: state_dict(), 1: state_dict(), 2: state_dict("33" * 8)})
    groups[1].differing = 30
    groups[1].diffs = [LeafDiff(f"k{i}", tensor_leaf(), tensor_leaf(digest="dd" * 8)) for i in range(8)]
    lines = render(Comparison("x", groups, [])).splitlines()
    assert lines[1].startswith("rank 2 (1 of 3) differs in 30 of 120 keys")
    assert lines[-1] == "  ... and 22 more" and len(lines) == 2 + 8 + 1


def test_only_errors():
    groups, errors = group_summaries({0: {"error": "E: a"}, 1: {"error": "E: a"}})
    assert render(Comparison("x", groups, errors)) == "ranks 0-1 (2 of 2): E: a"
    assert errors == [ErrorGroup([0, 1], "E: a")]


@given(st.lists(st.binary(min_size=8, max_size=8), max_size=30), st.data())
def test_differing_slots_finds_exactly_the_changed_digests(digests, data):
    changed = data.draw(st.sets(st.integers(0, max(0, len(digests) - 1))) if digests else st.just(set()))
    other = [bytes(b ^ 0xFF for b in d) if i in changed else d for i, d in enumerate(digests)]
    assert differing_slots(b"".join(digests), b"".join(other), 8) == sorted(changed)


@given(st.lists(st.text(max_size=3), unique=True, max_size=20), st.lists(st.text(max_size=3), unique=True,
                                                                         max_size=20))
def test_aligning_paths_pairs_equal_paths_and_names_the_rest(reference, own):
    pairs, missing, extra = align_paths(reference, own)
    assert all(reference[r] == own[o] for r, o in pairs)
    assert sorted([reference[r] for r, _ in pairs] + missing) == sorted(reference)
    assert sorted([own[o] for _, o in pairs] + extra) == sorted(own)
    assert [o for _, o in pairs] == sorted(o for _, o in pairs)


@given(st.lists(st.integers(1, 7), min_size=1, max_size=4), st.data())
def test_unravel_inverts_c_order_flattening(shape, data):
    flat = data.draw(st.integers(0, math.prod(shape) - 1))
    index = unravel(flat, shape)
    back = 0
    for i, n in zip(index, shape):
        back = back * n + i
    assert back == flat and all(0 <= i < n for i, n in zip(index, shape))


def test_describe_mixed_and_empty_containers():
    mixed = dict(state_dict(), type="dict", counts={"number": 3, "object": 1}, dtypes=[], devices=[],
                 nbytes=0)
    assert describe(mixed) == "dict of 3 numbers, 1 object, finite, checksum 11111111"
    empty = dict(mixed, counts={}, leaves=0, finite=None)
    assert describe(empty) == "empty dict, checksum 11111111"


def test_number_differences_of_big_integers_are_exact():
    ref, own = {"kind": "number", "value": 2 ** 60}, {"kind": "number", "value": 2 ** 60 + 1}
    assert number_difference(ref, own) == 1 and isinstance(number_difference(ref, own), int)
    assert number_difference({"kind": "number", "value": 0.5}, {"kind": "number", "value": 0.25}) == 0.25
