"""One field's summary across ranks: constants, rank-following ints, ranges, medians, outliers."""
from __future__ import annotations

import math
import random
import statistics

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mlp_magic.output.pure.fold import summary as fold_summary
from mlp_magic.output.pure.fold.summary import Outlier, summarise


def keys(count: int) -> tuple:
    return tuple(range(count))


def follows_rank(count: int) -> list:
    return [("rank", tuple(map(str, range(count))))]


def test_the_same_token_everywhere_is_shown_as_it_is():
    summary = summarise(("3.0e-04",) * 8, keys(8))
    assert (summary.text, summary.varies, summary.outliers, summary.bad) == ("3.0e-04", False, (), False)
    assert summarise(("nan",) * 4, keys(4)).bad  # nothing differs, but it is still a problem


def test_ints_that_follow_the_rank_or_a_supplied_map():
    tokens = tuple(str(r) for r in range(16))
    assert summarise(tokens, keys(16), follows=follows_rank(16)).text == "{rank}"
    local = tuple(str(r % 8) for r in range(16))
    follows = [*follows_rank(16), ("local_rank", local), ("node_rank", tuple(str(r // 8) for r in range(16)))]
    assert summarise(local, keys(16), follows=follows).text == "{local_rank}"
    assert summarise(tuple(str(r // 8) for r in range(16)), keys(16), follows=follows).text == "{node_rank}"
    # a float column never "follows": 0.0 is not rank 0
    assert summarise(tuple(f"{r}.0" for r in range(16)), keys(16), follows=follows_rank(16)).text != "{rank}"


def test_other_ints_are_a_range_and_floats_a_range_with_median():
    assert summarise(tuple(str(r * 2) for r in range(256)), keys(256)).text == "{0..510}"
    tokens = tuple(f"{0.5 + r / 1000:.4f}" for r in range(64))
    assert summarise(tokens, keys(64)).text == "{0.5000..0.5630 ~0.5310}"
    assert summarise(tuple(reversed(tokens)), keys(64)).text == "{0.5000..0.5630 ~0.5310}"


def test_hex_ids_are_a_range():
    assert summarise(("0x7f10", "0x7f0a", "0x7fff"), keys(3)).text == "{0x7f0a,0x7f10,0x7fff}"   # listed
    many = tuple(hex(0x7f00 + 16 * r) for r in range(12))
    assert summarise(many, keys(12)).text == "{0x7f00..0x7fb0}"
    assert summarise(("0x10", "16"), keys(2)).varies


def test_nan_and_inf_are_always_named():
    tokens = [f"{0.5 + r / 1000:.4f}" for r in range(16)]
    tokens[7], tokens[9], tokens[11] = "nan", "inf", "nan"
    summary = summarise(tuple(tokens), keys(16))
    assert summary.outliers == (Outlier((7, 11), "nan"), Outlier((9,), "inf"))
    assert summary.text == "{0.5000..0.5150 ~0.5060}"   # over the finite values
    assert summarise(("nan", "inf"), keys(2)).outliers == (Outlier((0,), "nan"), Outlier((1,), "inf"))


def test_a_value_far_from_the_rest_is_named_and_noise_is_not():
    rnd = random.Random(3)
    noise = [f"{rnd.gauss(0.5, 0.01):.5f}" for _ in range(512)]
    assert summarise(tuple(noise), keys(512)).outliers == ()
    noise[37] = "0.90000"
    assert summarise(tuple(noise), keys(512)).outliers == (Outlier((37,), "0.90000"),)
    uniform = tuple(str(r) for r in range(512))   # spread evenly: nothing is far
    assert summarise(uniform, keys(512)).outliers == ()


def test_when_most_values_agree_exactly_a_lone_different_one_is_named():
    steps = ["100"] * 16
    steps[5] = "99"        # the MAD is 0; the mean absolute deviation decides
    assert summarise(tuple(steps), keys(16)).outliers == (Outlier((5,), "99"),)
    half = ["0.12"] * 8 + ["0.13"] * 8   # two common values are not outliers
    assert summarise(tuple(half), keys(16)).outliers == ()


def test_a_float_one_printed_digit_away_is_rounding_not_an_outlier():
    took = ["0.12"] * 499 + ["0.13"] * 13
    assert summarise(tuple(took), keys(512)).outliers == ()
    losses = ["0.5000"] * 62 + ["0.5001"] * 2
    assert summarise(tuple(losses), keys(64)).outliers == ()
    losses[9] = "0.5100"   # a hundred printed units away: named
    assert summarise(tuple(losses), keys(64)).outliers == (Outlier((9,), "0.5100"),)
    assert [fold_summary.print_unit(t) for t in ("0.12", "2.5e-3", "1e5", "7", "0x1f")] == \
        [0.01, 1e-4, 1e5, 0.0, 0.0]


def test_too_few_values_have_no_outliers_but_nan():
    assert summarise(("1", "1", "1000"), keys(3)).outliers == ()
    assert summarise(("1", "nan", "1000"), keys(3)).outliers == (Outlier((1,), "nan"),)


def test_huge_integers_do_not_break_the_rule():
    tokens = tuple(str(10 ** 400 + r) for r in range(8))
    assert summarise(tokens, keys(8)).text.startswith("{1000")


# ---------------------------------------------------------------- the rule against brute force
def brute_outliers(values: list) -> set:
    """The module docstring's rule, computed the plain way: indices of far finite values."""
    finite = sorted(v for v in values if math.isfinite(v))
    if len(finite) < fold_summary.MIN_VALUES_FOR_OUTLIERS:
        return set()
    median = statistics.median(finite)
    mad = statistics.median(abs(v - median) for v in finite)
    sigma = fold_summary.MAD_TO_SIGMA * mad
    if sigma == 0:
        sigma = fold_summary.MEAN_AD_TO_SIGMA * math.fsum(abs(v - median) for v in finite) / len(finite)
    if sigma == 0:
        return set()
    sigma = max(sigma, fold_summary.print_unit(repr(finite[(len(finite) - 1) // 2])))   # floats' floor
    reach = fold_summary.SIGMAS * sigma
    return {i for i, v in enumerate(values) if math.isfinite(v) and abs(v - median) > reach}


VALUES = st.lists(st.one_of(st.integers(-50, 50), st.sampled_from([0, 0, 1000, -1000])),
                  min_size=1, max_size=40)


@given(VALUES)
@settings(max_examples=500)
def test_outliers_match_the_rule_computed_by_brute_force(ints):
    values = [v / 4 for v in ints]
    tokens = tuple(repr(v) for v in values)
    summary = summarise(tokens, keys(len(tokens)))
    found = {k for o in summary.outliers for k in o.keys}
    expected = brute_outliers(values) if len(set(tokens)) > 1 else set()
    assert found == expected


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60))
@settings(max_examples=500)
def test_mad_from_sorted_values_equals_the_plain_computation(values):
    ranked = sorted(values)
    value = lambda i: ranked[i]  # noqa: E731
    median = fold_summary._median(value, len(ranked))
    expected = statistics.median(abs(v - median) for v in ranked)
    assert math.isclose(fold_summary._mad(value, len(ranked), median), expected, rel_tol=1e-9, abs_tol=1e-9)


@given(st.lists(st.integers(0, 9999), min_size=2, max_size=80), st.integers(2, 4))
@settings(max_examples=300)
def test_the_sorted_string_shortcut_gives_the_general_answer(ints, decimals):
    """Plain decimals of one width sort as strings: the fast path must agree with the float path."""
    tokens = tuple(f"{v / 10 ** decimals:.{decimals}f}".zfill(8) for v in ints)
    assume(len({len(t) for t in tokens}) == 1)
    fast = summarise(tokens, keys(len(tokens)), sortable=True)
    general = summarise(tokens, keys(len(tokens)))
    assert fast.text == general.text
    assert {k for o in fast.outliers for k in o.keys} == {k for o in general.outliers for k in o.keys}


# ---------------------------------------------------------------- a handful of values: listed
LIMIT = fold_summary.MAX_LISTED_VALUES


@st.composite
def field_with_distinct_values(draw):
    """A field of some ranks holding 2 .. LIMIT + 2 distinct floats of one print width, in any
    order and with repeats: at, below and above the listing threshold."""
    count = draw(st.integers(2, LIMIT + 2))
    values = draw(st.lists(st.integers(0, 9999), min_size=count, max_size=count, unique=True))
    tokens = [f"{v / 10000:.4f}" for v in values]
    extra = draw(st.lists(st.sampled_from(tokens), max_size=40))
    return tuple(draw(st.permutations(tokens + extra))), sorted(tokens)


@given(field_with_distinct_values())
@settings(max_examples=400)
def test_a_handful_of_distinct_values_is_listed_and_more_are_a_range(field):
    tokens, distinct = field
    text = summarise(tokens, keys(len(tokens))).text
    if len(distinct) <= LIMIT:
        assert text == "{" + ",".join(distinct) + "}"
    else:
        assert text == f"{{{distinct[0]}..{distinct[-1]} ~{sorted(tokens)[(len(tokens) - 1) // 2]}}}"
    fast = summarise(tokens, keys(len(tokens)), sortable=True)    # the sorted-string path agrees
    assert fast.text == text


@given(st.integers(LIMIT - 1, LIMIT + 1), st.sampled_from(["int", "hex"]))
def test_integers_and_hex_ids_list_up_to_the_threshold(count, kind):
    tokens = tuple(str(100 + 7 * i) if kind == "int" else hex(0x7f00 + 16 * i)
                   for i in reversed(range(count)))
    text = summarise(tokens, keys(count)).text
    if count <= LIMIT:
        assert text == "{" + ",".join(reversed(tokens)) + "}"
    else:
        assert text == f"{{{tokens[-1]}..{tokens[0]}}}"


def test_listed_values_leave_nan_and_inf_to_the_outliers():
    tokens = ("0.5", "0.6", "nan", "0.5", "inf")
    summary = summarise(tokens, keys(5))
    assert summary.text == "{0.5,0.6}"
    assert summary.outliers == (Outlier((2,), "nan"), Outlier((4,), "inf"))
    assert summarise(("0.5", "nan", "0.5"), keys(3)).text == "0.5"   # one finite value: itself


FEW = ["-3", "-2", "-1", "0", "1", "2", "3", "4", "nan", "0", "1", "inf"]   # 8 numbers, nan, inf


@given(st.permutations(FEW), st.integers(0, 3), st.permutations(range(len(FEW))))
def test_a_summary_does_not_depend_on_which_rank_printed_first(tokens, drop, order):
    """The same tokens from the ranks in another order fold to the same text: 8 numbers are
    listed whichever rank came first (the listing's cut-off once counted the first nine tokens
    only, nan among them, and gave a range for some orders)."""
    tokens = tokens[drop:]
    order = [k for k in order if k < len(tokens)]
    keys = list(range(len(tokens)))
    one = summarise(tuple(tokens), tuple(keys))
    other = summarise(tuple(tokens[k] for k in order), tuple(order))
    assert one.text == other.text
    assert {k for o in one.outliers for k in o.keys} == {k for o in other.outliers for k in o.keys}
