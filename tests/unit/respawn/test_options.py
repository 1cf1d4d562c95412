"""core/options' kinds for ``%mpirun --respawn``: ``--copy NAMES`` (python_names) and ``--from RANK``
(rank_number), and how a refusal reaches the user through the parser."""
from __future__ import annotations

import keyword

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.core.options import BadValue, Option, argv_words, parse, python_names, rank_number
from mlp_magic.errors import MlpMagicError


def refusal(kind, value: str) -> str:
    with pytest.raises(BadValue) as caught:
        kind(value)
    return str(caught.value)


# ---------------------------------------------------------------- python_names

@pytest.mark.parametrize("value, names", [
    ("model", ("model",)),
    ("model,opt", ("model", "opt")),
    (" model , opt ", ("model", "opt")),
    ("opt,model", ("opt", "model")),                     # the order given
    ("a,b,a", ("a", "b")),                               # each once, first place kept
    ("b, a ,b,a", ("b", "a")),                           # spaces stripped before duplicates collapse
    ("_x,x_1,\u00e9t\u00e9", ("_x", "x_1", "\u00e9t\u00e9")),
    ("match,case,type,_", ("match", "case", "type", "_")),   # soft keywords are names
])
def test_python_names_takes_names(value, names):
    assert python_names(value) == names


@pytest.mark.parametrize("value", ["", " ", ",", "a,", ",a", "a,,b", "a, ,b", " , "])
def test_python_names_refuses_an_empty_part(value):
    assert refusal(python_names, value) == f"expected Python names separated by commas, got {value!r}"


@pytest.mark.parametrize("value, bad", [
    ("class", "class"), ("model,for", "for"), ("None", "None"), ("a,True", "True"),
    ("1x", "1x"), ("a-b", "a-b"), ("model,opt.lr", "opt.lr"), ("a b", "a b"), ("x,$y", "$y"),
])
def test_python_names_refuses_a_keyword_or_a_non_identifier(value, bad):
    assert refusal(python_names, value) == f"expected a Python name, got {bad!r}"


def test_python_names_names_the_first_bad_part():
    assert refusal(python_names, "ok,1st,for") == "expected a Python name, got '1st'"


NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))


PADS = st.lists(st.sampled_from(["", " ", "  "]), min_size=16, max_size=16)


@given(st.lists(NAME, min_size=1, max_size=8), PADS)
@settings(max_examples=300)
def test_python_names_gives_each_name_once_in_first_order(names, pads):
    value = ",".join(f"{pads[2 * i % 16]}{name}{pads[(2 * i + 1) % 16]}" for i, name in enumerate(names))
    got = python_names(value)
    assert got == tuple(dict.fromkeys(names))
    assert len(set(got)) == len(got)


@given(st.text(max_size=30))
@settings(max_examples=300)
def test_python_names_gives_names_or_one_bad_value(value):
    try:
        names = python_names(value)
    except BadValue as error:
        assert str(error).startswith(("expected Python names separated by commas, got ",
                                      "expected a Python name, got "))
        return
    assert names and all(name.isidentifier() and not keyword.iskeyword(name) for name in names)
    assert len(set(names)) == len(names)
    assert ",".join(names) == ",".join(dict.fromkeys(part.strip() for part in value.split(",")))


# ---------------------------------------------------------------- rank_number

@pytest.mark.parametrize("value, rank", [
    ("0", 0), ("3", 3), ("007", 7), ("000", 0), ("0" * 30 + "12", 12),
    ("999999999", 10 ** 9 - 1), ("0999999999", 10 ** 9 - 1),
])
def test_rank_number_takes_ranks(value, rank):
    assert rank_number(value) == rank


@pytest.mark.parametrize("value", [
    "", " ", "-1", "+1", " 1", "1 ", "1.0", "1e3", "0x1", "one", "1_000",
    "\u00b2", "1\u00b2", "\u0663", "\uff11",   # '²', Arabic-Indic 3, fullwidth 1: isdigit() but not 0-9
    "1000000000", "9" * 10,                              # over 9 digits
])
def test_rank_number_refuses(value):
    assert refusal(rank_number, value) == f"expected a rank number, got {value[:20]!r}"


def test_rank_number_shows_at_most_twenty_characters():
    assert refusal(rank_number, "9" * 50) == f"expected a rank number, got {'9' * 20!r}"


@given(st.integers(0, 10 ** 9 - 1), st.integers(0, 5))
def test_rank_number_reads_back_any_rank_of_up_to_nine_digits(rank, zeros):
    assert rank_number("0" * zeros + str(rank)) == rank


@given(st.text(max_size=14))
@settings(max_examples=300)
def test_rank_number_gives_a_whole_number_or_one_bad_value(value):
    try:
        rank = rank_number(value)
    except BadValue as error:
        assert str(error) == f"expected a rank number, got {value[:20]!r}"
        assert not (value and all(c in "0123456789" for c in value)) or len(value.lstrip("0")) > 9
        return
    assert all(c in "0123456789" for c in value) and 0 <= rank < 10 ** 9 and rank == int(value)


# ---------------------------------------------------------------- through the parser

COPY = Option(names=("--copy",), dest="names", kind=python_names, metavar="NAMES")
FROM = Option(names=("--from",), dest="source", kind=rank_number, metavar="RANK")


def test_the_parser_fills_names_and_source():
    parsed = parse(argv_words(["--copy", "model,opt,model", "--from=2"]), (COPY, FROM), "%mpirun --respawn")
    assert parsed.values == {"names": ("model", "opt"), "source": 2}


@pytest.mark.parametrize("argv, message", [
    (["--copy", "model,class"], "%mpirun --respawn: --copy: expected a Python name, got 'class'"),
    (["--copy", "a,,b"], "%mpirun --respawn: --copy: expected Python names separated by commas, got 'a,,b'"),
    (["--from", "\u00b2"], "%mpirun --respawn: --from: expected a rank number, got '\u00b2'"),
    (["--from=-1"], "%mpirun --respawn: --from: expected a rank number, got '-1'"),
])
def test_the_parser_turns_a_refusal_into_one_error(argv, message):
    with pytest.raises(MlpMagicError) as caught:
        parse(argv_words(argv), (COPY, FROM), "%mpirun --respawn")
    assert str(caught.value) == message
