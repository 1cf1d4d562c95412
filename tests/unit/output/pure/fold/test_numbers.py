"""Numbers in output text: which tokens are numbers, masking and filling back, shapes."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.output.pure.fold.numbers import (FLOAT, HEX, INT, MASK, SPECIAL, fill, label_before, mask_line,
                                                scan, shape, shape_is_safe, token_kind)


@pytest.mark.parametrize("line, template, tokens", [
    ("step 10 loss 0.5000 rank 3", "step \0 loss \0 rank \0", ["10", "0.5000", "3"]),
    ("loss nan", "loss \0", ["nan"]),
    ("loss -inf grad inf Inf NaN -Infinity", "loss \0 grad \0 \0 \0 \0",
     ["-inf", "inf", "Inf", "NaN", "-Infinity"]),
    ("lr 1e-3 and 3.2E+05, .5", "lr \0 and \0, \0", ["1e-3", "3.2E+05", ".5"]),
    ("object at 0x7f3a2b10", "object at \0", ["0x7f3a2b10"]),
    ("x=-1 y=+2", "x=\0 y=\0", ["-1", "+2"]),
    ("ranks 0-3", "ranks \0-\0", ["0", "3"]),        # a range, not 0 and -3
    ("lr-2", "lr-\0", ["2"]),                           # a sign after a letter is not a sign
    ("cuda:1 worker3", "cuda:\0 worker\0", ["1", "3"]),
    ("info banana infinite", "info banana infinite", []),  # nan/inf only as words
    ("version 1.2.3", "version \0\0", ["1.2", ".3"]),
    ("done in 10.", "done in \0.", ["10"]),              # a point must be followed by digits
    ("3e", "\0e", ["3"]),
    ("no numbers here", "no numbers here", []),
    ("arabic ٣ digits stay", "arabic ٣ digits stay", []),  # ASCII digits only
])
def test_what_counts_as_a_number(line, template, tokens):
    assert mask_line(line) == (template, tokens)
    assert fill(template, tokens) == line


@pytest.mark.parametrize("token, kind", [
    ("12", INT), ("-3", INT), ("0.5", FLOAT), ("1e-3", FLOAT), ("3.2E+05", FLOAT), (".5", FLOAT),
    ("nan", SPECIAL), ("-inf", SPECIAL), ("Infinity", SPECIAL), ("0x7f", HEX), ("0XFF", HEX),
])
def test_token_kinds(token, kind):
    assert token_kind(token) == kind


def test_fill_refuses_a_wrong_token_count():
    with pytest.raises(ValueError):
        fill("a \0 b", [])


@pytest.mark.parametrize("literal, label", [
    ("step 3 loss ", "loss"), ("loss=", "loss"), ("tokens/s ", "tokens/s"), ("(", ""),
    ("grad_norm: ", "grad_norm"),
])
def test_label_is_the_word_before(literal, label):
    assert label_before(literal) == label


TEXT = st.text(st.sampled_from(list("0123456789 .-+eExXnaifINFy_:()[]\nab\u00e9\u0663")), max_size=60)


@given(TEXT)
@settings(max_examples=400)
def test_masking_round_trips_and_leaves_no_ascii_digit(text):
    template, tokens = mask_line(text)
    assert fill(template, tokens) == text
    assert not any(c in "0123456789" for c in template)
    masked, spans = scan(text)
    assert masked == template
    assert [text[spans[i]:spans[i + 1]] for i in range(0, len(spans), 2)] == tokens


@given(TEXT, st.randoms(use_true_random=False))
@settings(max_examples=400)
def test_texts_of_one_safe_shape_have_their_numbers_at_the_same_places(text, rnd):
    """What lets one scan serve every text of a shape: change digits, the spans stay."""
    other = "".join(rnd.choice("0123456789") if c.isascii() and c.isdigit() else c for c in text)
    assert shape(other) == shape(text)
    if shape_is_safe(shape(text)):
        assert scan(other)[1] == scan(text)[1]
        assert scan(other)[0] == scan(text)[0]


def test_hex_after_a_nonzero_digit_is_why_some_shapes_are_unsafe():
    assert scan("1x5")[1] != scan("0x5")[1] and shape("1x5") == shape("0x5")
    assert not shape_is_safe(shape("id 0x5")) and shape_is_safe(shape("3 x 5"))


def test_mask_is_not_a_printable_character():
    assert MASK == "\0" and not MASK.isprintable()
    assert random  # the module is used by the property above through hypothesis' randoms
