"""core/numbers: a number as JSON gives it, safe to compute with."""
from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.numbers import LIMIT, number
from tests.unit.fuzz_checks import FUZZ


def test_finite_numbers_within_the_limit_are_kept_as_they_came():
    assert [number(v) for v in (0, -5, 1.5, LIMIT - 1, -(LIMIT - 1))] == [0, -5, 1.5, LIMIT - 1, -(LIMIT - 1)]
    assert type(number(3)) is int and type(number(3.0)) is float


def test_what_no_computation_can_take_is_none():
    huge = json.loads("1" + "0" * 400)   # json reads it; float() and math.isfinite() raise on it
    for value in (huge, -huge, LIMIT, math.inf, -math.inf, math.nan, True, False, None, "1", [1], {}):
        assert number(value) is None, value
    assert number(2 ** 53, 2 ** 53) is None and number(2 ** 53 - 1, 2 ** 53) == 2 ** 53 - 1


@FUZZ
@given(st.integers() | st.floats() | st.booleans() | st.none() | st.text(max_size=3))
def test_a_number_kept_converts_and_compares(value):
    kept = number(value)
    if kept is not None:
        assert math.isfinite(float(kept)) and abs(kept) < LIMIT
