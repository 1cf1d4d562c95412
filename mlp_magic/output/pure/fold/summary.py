"""One field of a folded line: what its values across ranks look like, and its outliers (pure).

A field's values are the tokens one number position holds in every rank's line, as printed.
Its summary, in this order:
  - the same token on every rank: the token itself;
  - an integer equal to the rank on every rank: ``{rank}`` (then ``{local_rank}``,
    ``{node_rank}``, when the caller gives those maps);
  - at most ``MAX_LISTED_VALUES`` distinct values: each of them, in numeric order:
    ``{0.50,0.51,0.52,0.53}`` (a range would hide what a few lines show plainly);
  - more integers (and hex ids): ``{min..max}``;
  - more floats: ``{min..max ~median}`` (the median is the lower middle value, as printed).

The outlier rule (also in the README): nan and inf are always outliers. A finite value x is an
outlier when |x - median| > 5 sigma, sigma estimated robustly from the finite values:
1.4826 * MAD (the median absolute deviation from the median), or, where the MAD is 0 (more than
half of the values are equal), 1.2533 * the mean absolute deviation from the median. Both
estimate a normal distribution's sigma, so on noisy values (timings) a false alarm is
about 1 in 2 million values. For floats, sigma is at least one unit of the median's last printed
digit (0.01 for "0.12"): where most ranks print the same value, the mean deviation alone would
name a value one rounding step away (integers are exact: no floor). A field needs at least 5
finite values to have outliers. Values that follow the rank have none. The MAD comes from the
sorted values in O(log n) steps (the k-th smallest of two sorted runs), so a field costs a sort,
not a pass in Python.
"""
from __future__ import annotations

import math
from bisect import bisect_left

from mlp_magic.output.pure.fold.numbers import HEX, INT, SPECIAL, token_kind
from mlp_magic.core.records import Record

SIGMAS = 5.0
MAD_TO_SIGMA = 1.4826
MEAN_AD_TO_SIGMA = 1.2533
MIN_VALUES_FOR_OUTLIERS = 5
# A field with at most this many distinct values lists them instead of a range: every value of
# one node of 8 GPUs, and a field that splits 512 ranks into a few camps (epoch 3 and 4).
MAX_LISTED_VALUES = 8


class Outlier(Record, frozen=True):
    keys: tuple      # the ranks (or hosts) printing this token
    token: str       # as printed: "nan", "9.5"


class FieldSummary(Record, frozen=True):
    text: str                 # "0.5", "{rank}", "{0..511}", "{0.5000..0.5630 ~0.5315}"
    varies: bool = False      # False: the same token everywhere
    outliers: tuple = ()      # Outlier, in key order
    bad: bool = False         # a constant nan/inf: shown as a problem, though nothing differs


def summarise(tokens, keys, *, sortable: bool = False, follows=(), kinds: set | None = None) -> FieldSummary:
    """The summary of one field: ``tokens[i]`` was printed by ``keys[i]``.

    ``sortable``: the tokens are plain non-negative decimals of one length with the point at one
    place, so their string order is their numeric order (the caller knows it from their shape).
    ``follows``: [(name, tuple of expected tokens, in ``keys`` order)], e.g. ("rank", ("0", "1")).
    ``kinds``: the token kinds present, when the caller knows them (else they are looked up).
    """
    first = tokens[0]
    ranked = sorted(tokens) if sortable else None
    if ranked[0] == ranked[-1] if sortable else tokens.count(first) == len(tokens):
        return FieldSummary(first, bad=token_kind(first) == SPECIAL)
    if kinds is None:
        kinds = {token_kind(t) for t in set(tokens)}
    if kinds == {INT}:
        for name, expected in follows:
            if tokens == expected:
                return FieldSummary(f"{{{name}}}", varies=True)
    summary = _ranged(tokens, keys, ranked, kinds)
    distinct = _few_distinct(tokens)
    if distinct is not None:
        values = _finite_in_order(distinct, kinds)
        if 1 < len(values) <= MAX_LISTED_VALUES:
            return FieldSummary("{" + ",".join(values) + "}", varies=True, outliers=summary.outliers)
    return summary


def _few_distinct(tokens) -> set | None:
    """The distinct tokens, or None as soon as more than ``MAX_LISTED_VALUES`` of them are not nan
    or inf (most fields of many ranks: no set of them all). Whatever the tokens' order, the
    same answer: the folded line must not depend on which rank came first."""
    seen: set = set()
    numbers = 0
    for token in tokens:
        if token not in seen:
            seen.add(token)
            if token_kind(token) != SPECIAL:
                numbers += 1
                if numbers > MAX_LISTED_VALUES:
                    return None
    return seen


def _finite_in_order(distinct: set, kinds: set) -> list:
    """The distinct tokens in numeric order, less nan and inf (those are named as outliers)."""
    if HEX in kinds and kinds != {HEX}:   # hex ids mixed with decimals: nothing to order them by
        return sorted(distinct)
    parse = (lambda t: int(t, 16)) if kinds == {HEX} else int if kinds == {INT} else float
    values = [(parse(t), t) for t in distinct]
    return [t for _, t in sorted((v, t) for v, t in values if not _non_finite(v))]


def _ranged(tokens, keys, ranked, kinds: set) -> FieldSummary:
    """A varying field that does not follow a rank: a range, and its outliers."""
    if ranked is not None:
        return _summarise_sorted(tokens, keys, ranked, float)
    if kinds == {HEX}:
        low, high = _extremes(tokens, lambda t: int(t, 16))
        return FieldSummary(f"{{{low}..{high}}}", varies=True)
    if HEX in kinds:  # hex ids mixed with decimals: nothing to order them by
        return FieldSummary("{" + ",".join(sorted(set(tokens))[:3]) + ",...}", varies=True)
    parse = int if kinds == {INT} else float
    return _summarise_numbers(tokens, keys, parse, SPECIAL in kinds)


def _summarise_numbers(tokens, keys, parse, special: bool) -> FieldSummary:
    values = list(map(parse, tokens))
    if parse is float and not special:   # only an exponent beyond a float's range gives inf here
        special = any(_non_finite(v) for v in (min(values), max(values)))
    bad = _bad_outliers(tokens, keys, values) if special else []
    if bad:
        pairs = sorted((v, t) for v, t in zip(values, tokens) if not _non_finite(v))
    else:
        pairs = sorted(zip(values, tokens))
    if not pairs:
        bad.sort(key=lambda o: _sort_key(o.keys[0]))
        return FieldSummary("{" + ",".join(sorted(set(tokens))) + "}", varies=True, outliers=tuple(bad))
    summary = _summarise_sorted(tokens, keys, [t for _, t in pairs], parse)
    outliers = sorted([*bad, *summary.outliers], key=lambda o: _sort_key(o.keys[0]))
    return FieldSummary(summary.text, varies=True, outliers=tuple(outliers))


def _summarise_sorted(tokens, keys, ranked, parse) -> FieldSummary:
    """``ranked``: the finite tokens in numeric order; ``parse`` turns one into its value."""
    low, high, middle = ranked[0], ranked[-1], ranked[(len(ranked) - 1) // 2]
    kind = {token_kind(low), token_kind(high)}
    if low == high:           # one value but for nan or inf
        text = low
    elif kind == {INT}:
        text = f"{{{low}..{high}}}"
    else:
        text = f"{{{low}..{high} ~{middle}}}"
    outliers = _far_outliers(tokens, keys, ranked, parse)
    return FieldSummary(text, varies=True, outliers=tuple(outliers))


def _extremes(tokens, value) -> tuple[str, str]:
    return min(tokens, key=value), max(tokens, key=value)


def _non_finite(value) -> bool:
    return value != value or value in (math.inf, -math.inf)


def _bad_outliers(tokens, keys, values) -> list:
    """nan and inf, each distinct token with the keys printing it."""
    found: dict = {}
    for token, key, value in zip(tokens, keys, values):
        if _non_finite(value):
            found.setdefault(token, []).append(key)
    return [Outlier(tuple(sorted(k, key=_sort_key)), token) for token, k in found.items()]


def _far_outliers(tokens, keys, ranked, parse) -> list:
    """Finite values beyond SIGMAS robust sigmas from the median (the module's rule)."""
    count = len(ranked)
    if count < MIN_VALUES_FOR_OUTLIERS:
        return []
    try:
        value = _Lazy(ranked, parse)
        median = _median(value, count)
        if _surely_none(value, count, median):
            return []
        sigma = MAD_TO_SIGMA * _mad(value, count, median)
        if sigma == 0:
            sigma = MEAN_AD_TO_SIGMA * _mean_absolute_deviation(ranked, parse, median)
        sigma = max(sigma, print_unit(ranked[(count - 1) // 2]))   # the median token, as printed
        low, high = median - SIGMAS * sigma, median + SIGMAS * sigma
        if sigma == 0 or not (math.isfinite(low) and math.isfinite(high)):
            return []
        far = {ranked[i] for i in range(_first_at_least(value, count, low))}
        index = count - 1
        while index >= 0 and value(index) > high:
            far.add(ranked[index])
            index -= 1
    except OverflowError:   # integers beyond a float's range: no rule applies
        return []
    return _keys_of(tokens, keys, far) if far else []


def print_unit(token: str) -> float:
    """One unit of a float token's last printed digit: "0.12" -> 0.01, "2.5e-3" -> 1e-4; 0 for
    an integer, which is exact (a step counter one behind is news, a rounded float is not)."""
    mantissa, _, exponent = token.lower().partition("e")
    if "." not in mantissa and not exponent or mantissa.startswith(("0x", "-0x")):
        return 0.0
    decimals = len(mantissa.split(".", 1)[1]) if "." in mantissa else 0
    try:
        power = int(exponent) if exponent else 0
    except ValueError:
        power = 0
    return 10.0 ** max(min(power - decimals, 300), -300)


def _surely_none(value, count: int, median: float) -> bool:
    """A quick pass: the MAD is at least the median's distance to the nearer quartile (fewer than
    half of the values lie strictly between the quartiles), so when the extremes are within
    SIGMAS of that bound, no value is an outlier and the MAD need not be found."""
    bound = min(median - value(count // 4), value((3 * count) // 4) - median)
    reach = SIGMAS * MAD_TO_SIGMA * bound
    return bound > 0 and median - value(0) <= reach and value(count - 1) - median <= reach


class _Lazy:
    """``value(i)``: ranked[i] parsed on first use (a field's rule reads a few dozen of them)."""

    def __init__(self, ranked, parse):
        self.ranked, self.parse, self.cache = ranked, parse, {}

    def __call__(self, index: int) -> float:
        found = self.cache.get(index)
        if found is None:
            found = self.cache[index] = float(self.parse(self.ranked[index]))
        return found


def _median(value, count: int) -> float:
    middle = count // 2
    return value(middle) if count % 2 else (value(middle - 1) + value(middle)) / 2


def _mad(value, count: int, median: float) -> float:
    """The median of |v - median| from the sorted values, without computing every deviation.

    The values below the split (index < count // 2) give deviations that grow as the index falls,
    those from the split on grow with the index: two sorted runs, whose k-th smallest is found
    by bisection."""
    split = count // 2
    left = lambda k: median - value(split - 1 - k)   # noqa: E731  (k < split)
    right = lambda k: value(split + k) - median     # noqa: E731  (k < count - split)
    if count % 2:
        return _kth_of_two(left, split, right, count - split, count // 2)
    lower = _kth_of_two(left, split, right, count - split, count // 2 - 1)
    upper = _kth_of_two(left, split, right, count - split, count // 2)
    return (lower + upper) / 2


def _kth_of_two(a, a_len: int, b, b_len: int, k: int) -> float:
    """The k-th smallest (from 0) of two ascending runs given as index -> value functions."""
    low, high = max(0, k + 1 - b_len), min(k + 1, a_len)
    while low < high:        # taken = how many come from a
        taken = (low + high) // 2
        if a(taken) < b(k - taken):
            low = taken + 1
        else:
            high = taken
    taken = low
    candidates = []
    if taken > 0:
        candidates.append(a(taken - 1))
    if k - taken >= 0 and k - taken < b_len:
        candidates.append(b(k - taken))
    return max(candidates)


def _mean_absolute_deviation(ranked, parse, median: float) -> float:
    values = list(map(float, map(parse, ranked)))
    split = bisect_left(values, median)
    above = math.fsum(values[split:]) - median * (len(values) - split)
    below = median * split - math.fsum(values[:split])
    return (above + below) / len(values)


def _first_at_least(value, count: int, bound: float) -> int:
    """The first index whose value is >= bound (bisection over the lazily parsed values)."""
    low, high = 0, count
    while low < high:
        middle = (low + high) // 2
        if value(middle) < bound:
            low = middle + 1
        else:
            high = middle
    return low


def _keys_of(tokens, keys, far: set) -> list:
    found: dict = {}
    for token, key in zip(tokens, keys):
        if token in far:
            found.setdefault(token, []).append(key)
    outliers = [Outlier(tuple(sorted(k, key=_sort_key)), token) for token, k in found.items()]
    return sorted(outliers, key=lambda o: _sort_key(o.keys[0]))


def _sort_key(key):
    return (0, key, "") if isinstance(key, int) else (1, 0, str(key))
