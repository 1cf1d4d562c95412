"""core/options: the one table-driven parser of every magic and command, its kinds, shell-like
words, ``$NAME`` expansion, the Options it gives and the usage it prints."""
from __future__ import annotations

import shlex
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.options import (OFF, BadValue, Option, Options, argv_words, choice, expand_vars,
                                    matching, number_in, parse, positive_int, python_name, seconds,
                                    split_line, split_words, text, usage, whole_number)
from tests.unit.parser_errors import error_of

NP = Option(names=("-np", "-n"), dest="np", kind=positive_int(), metavar="N", help="ranks")
FANOUT = Option(names=("-f", "--fanout"), dest="fanout", kind=positive_int(), default=64)
DIFF = Option(names=("--diff",), dest="diff", help="show a diff")
NO_GROUP = Option(names=("--no-group",), dest="group", kind=OFF, default=True)
HOSTFILE = Option(names=("--hostfile", "--machinefile"), dest="hostfile", kind=text, group="hosts")
HOSTS = Option(names=("-H", "--host"), dest="hosts", kind=text, group="hosts")
PACKAGE = Option(names=("--package",), dest="packages", kind=text, repeat=True, default=())
COPY = Option(names=("--copy",), dest="copy", kind=text, second=True)
TABLE = (NP, FANOUT, DIFF, NO_GROUP, HOSTFILE, HOSTS, PACKAGE, COPY)


def parsed(argv, table=TABLE, expand=None):
    return parse(argv_words(argv), table, "%x", expand)


# ---------------------------------------------------------------- kinds

@pytest.mark.parametrize("kind, good, value", [
    (text, "x", "x"), (text, " a b ", " a b "),
    (positive_int(), "1", 1), (positive_int(), "0008", 8), (positive_int(), "0" * 30 + "5", 5),
    (positive_int(), "1" + "0" * 9, 10 ** 9), (positive_int(10 ** 18), "9" * 18, 10 ** 18 - 1),
    (positive_int(10), "10", 10),
    (seconds(), "60", 60.0), (seconds(), "0.5", 0.5), (seconds(), "1e3", 1000.0), (seconds(), "1e9", 1e9),
    (seconds(86400), "86400", 86400.0),
    (number_in(0, 1, "a fraction"), "1", 1.0), (number_in(0, 1, "a fraction"), "1e-9", 1e-9),
    (whole_number, "0", 0), (whole_number, "007", 7), (whole_number, "9" * 9, 10 ** 9 - 1),
    (python_name, "res", "res"), (python_name, "r\u00e9sultat", "r\u00e9sultat"), (python_name, "_", "_"),
    (choice("auto", "torch", "mpi"), "mpi", "mpi"),
    (matching(r"[a-z]+", "a word"), "abc", "abc"),
])
def test_kinds_take_good_values(kind, good, value):
    assert kind(good) == value


@pytest.mark.parametrize("kind, bad, message", [
    (text, "", "expected a non-empty value, got ''"),
    (text, "  ", "expected a non-empty value, got '  '"),
    (positive_int(), "0", "expected a positive integer, got '0'"),
    (positive_int(), "000", "got '000'"),
    (positive_int(), "-1", "got '-1'"),
    (positive_int(), "2.5", "got '2.5'"),
    (positive_int(), "1e3", "got '1e3'"),
    (positive_int(), " 4", "got ' 4'"),
    (positive_int(), "\u00b2", "got '\u00b2'"),              # '²'.isdigit() is True, int('²') fails
    (positive_int(), "\u0664", "got '\u0664'"),              # an Arabic-Indic four
    (positive_int(), "1000000001", "got '1000000001'"),
    (positive_int(10 ** 30), "1" + "0" * 18, "got '1000000000000000000'"),
    (positive_int(), "9" * 40, "got '99999999999999999999'..."),
    (positive_int(), "9" * 5000, "got '99999999999999999999'..."),   # int() refuses over 4,300 digits
    (positive_int(10), "11", "expected a positive integer up to 10, got '11'"),
    (seconds(), "0", "expected a positive number of seconds, got '0'"),
    (seconds(), "-1", "got '-1'"),
    (seconds(), "nan", "got 'nan'"),
    (seconds(), "inf", "got 'inf'"),
    (seconds(), "-inf", "got '-inf'"),
    (seconds(), "1e400", "got '1e400'"),
    (seconds(), "soon", "got 'soon'"),
    (seconds(), "", "got ''"),
    (seconds(), "1.5e9", "got '1.5e9'"),
    (seconds(86400), "86401", "expected a positive number of seconds up to 86400, got '86401'"),
    (number_in(0, 1, "a fraction"), "0", "expected a fraction in (0, 1], got '0'"),
    (number_in(0, 1, "a fraction"), "1.01", "got '1.01'"),
    (number_in(0, 1, "a fraction"), "nan", "got 'nan'"),
    (number_in(0, 4096, "megabytes"), "inf", "expected megabytes in (0, 4096], got 'inf'"),
    (number_in(0, 1, "a fraction"), "half", "got 'half'"),
    (whole_number, "-1", "expected a frame number (0 is the innermost), got '-1'"),
    (whole_number, "1.0", "got '1.0'"),
    (whole_number, "x", "got 'x'"),
    (whole_number, "\u00b2", "got '\u00b2'"),
    (whole_number, "1" + "0" * 9, "got '1000000000'"),
    (whole_number, "9" * 40, "got '99999999999999999999'"),
    (python_name, "1abc", "expected a Python name, got '1abc'"),
    (python_name, "class", "got 'class'"),
    (python_name, "a-b", "got 'a-b'"),
    (python_name, "", "got ''"),
    (choice("auto", "torch", "mpi"), "nccl", "expected one of auto, torch, mpi, got 'nccl'"),
    (choice("auto", "torch", "mpi"), "MPI", "got 'MPI'"),
    (matching(r"[a-z]+", "a word"), "ab1", "not a word: 'ab1'"),
])
def test_kinds_refuse_bad_values_naming_them(kind, bad, message):
    with pytest.raises(BadValue) as caught:
        kind(bad)
    assert str(caught.value) == message or message in str(caught.value)
    assert len(str(caught.value)) < 200


# ---------------------------------------------------------------- parsing

@pytest.mark.parametrize("argv, values", [
    (["-np", "4"], {"np": 4}),
    (["-n", "4"], {"np": 4}),
    (["-np=4"], {"np": 4}),
    (["-n4"], {"np": 4}),                     # -fVALUE: a two-letter option that takes a value
    (["-f8"], {"fanout": 8}),
    (["-f=8"], {"fanout": 8}),
    (["--fanout=8"], {"fanout": 8}),
    (["--hostfile=a=b"], {"hostfile": "a=b"}),    # only the first = splits
    (["-Hw[0-1]"], {"hosts": "w[0-1]"}),
    (["--diff", "--no-group"], {"diff": True, "group": False}),
    (["--package", "a", "--package", "b", "--package", "a"], {"packages": ("a", "b", "a")}),
])
def test_values(argv, values):
    found = parsed(argv)
    assert found.values == values and found.rest is None and not found.dashes


@pytest.mark.parametrize("argv, spelled", [
    (["-H", "a", "-H", "b"], "-H"), (["-np", "2", "-n", "4"], "-n"), (["--diff", "--diff"], "--diff")])
def test_an_option_given_twice_is_refused_unless_it_repeats(argv, spelled):
    """Which one was meant is the user's to say (the last one winning would hide a mistake)."""
    assert error_of(parsed, argv) == f"%x: {spelled} given twice"


def test_given_keeps_the_spelling_written():
    assert parsed(["-n", "2", "--machinefile", "f", "--diff"]).given == {
        "np": "-n", "hostfile": "--machinefile", "diff": "--diff"}


@pytest.mark.parametrize("argv, rest, dashes", [
    (["echo", "hi"], 0, False),
    (["-np", "2", "echo", "-np", "3"], 2, False),     # what follows the options is the caller's
    (["-", "x"], 0, False),                           # '-' is a word (stdin), not an option
    (["--", "-np", "3"], 1, True),
    (["--diff", "--"], None, True),
    (["--"], None, True),
    (["--", "--"], 1, True),
    ([], None, False),
])
def test_rest_and_dashes(argv, rest, dashes):
    found = parsed(argv)
    assert (found.rest, found.dashes) == (rest, dashes)


def test_rest_is_an_offset_in_a_line_and_the_rest_is_never_split():
    line = "-np 4   echo 'unclosed"
    found = parse(split_words(line), TABLE, "%x")
    assert (found.values, line[found.rest:]) == ({"np": 4}, "echo 'unclosed")


@pytest.mark.parametrize("argv, copy, rest, values", [
    (["--copy", "a"], ("a", None), None, {}),
    (["--copy", "a", "b"], ("a", "b"), None, {}),
    (["--copy", "a", "--diff"], ("a", None), None, {"diff": True}),
    (["--copy", "a", "b", "--diff"], ("a", "b"), None, {"diff": True}),
    (["--copy", "a", "--", "ls"], ("a", None), 3, {}),
    (["--copy=a", "b", "--", "ls"], ("a", "b"), 3, {}),
])
def test_second_takes_the_next_word_unless_it_is_an_option(argv, copy, rest, values):
    found = parsed(argv)
    assert (found.values, found.rest) == ({"copy": copy, **values}, rest)


def test_expand_applies_to_option_values_only():
    found = parsed(["-H", "$H", "--copy", "$A", "$B", "--", "echo", "$H"], expand=str.upper)
    assert found.values == {"hosts": "$H", "copy": ("$A", "$B")}
    found = parse(argv_words(["-H", "h", "--copy", "a", "b", "--", "echo", "$H"]), TABLE, "%x",
                  expand=lambda word: word + "!")
    assert found.values == {"hosts": "h!", "copy": ("a!", "b!")} and found.rest == 6


@pytest.mark.parametrize("argv, message", [
    (["--frobnicate"], "%x: unknown option '--frobnicate'"),
    (["--fan", "2"], "%x: unknown option '--fan'"),                  # no abbreviations
    (["-x"], "%x: unknown option '-x'"),
    (["--diffx"], "%x: unknown option '--diffx'"),
    (["-npx"], "%x: -n: expected a positive integer, got 'px'"),
    (["-np"], "%x: -np needs a value"),
    (["--copy"], "%x: --copy needs a value"),
    (["-np", "0"], "%x: -np: expected a positive integer, got '0'"),
    (["-n=x"], "%x: -n: expected a positive integer, got 'x'"),
    (["--hostfile="], "%x: --hostfile: expected a non-empty value, got ''"),
    (["--diff=yes"], "%x: --diff takes no value (got --diff=yes)"),
    (["--no-group="], "%x: --no-group takes no value (got --no-group=)"),
    (["--hostfile", "f", "-H", "a"], "%x: give either --hostfile or -H, not both"),
    (["--host", "a", "--machinefile", "f"], "%x: give either --host or --machinefile, not both"),
])
def test_bad_words_are_one_error_naming_them(argv, message):
    assert error_of(parsed, argv) == message


def test_a_value_never_makes_a_second_line():
    def two_lines(value):
        raise BadValue(f"first\nsecond {value!r}")

    table = (Option(names=("--k",), dest="k", kind=two_lines),)
    assert error_of(parse, argv_words(["--k", "v"]), table, "%x") == "%x: --k: first\\nsecond 'v'"


def test_a_value_that_starts_with_a_dash_is_a_value():
    assert parsed(["-H", "-x", "--copy", "-a"]).values == {"hosts": "-x", "copy": ("-a", None)}


# ---------------------------------------------------------------- words

def test_split_line():
    assert split_line("-H 'a b' \"c d\" e\\ f", "%x") == ["-H", "a b", "c d", "e f"]
    assert split_line(" \t ", "%x") == []
    assert split_line("'' \"\"", "%x") == ["", ""]
    assert split_line('"a\\"b" "\\$x" "\\n"', "%x") == ['a"b', "$x", "\\n"]
    assert error_of(split_line, 'a "b', "%allrun") == "%allrun: cannot split 'a \"b': unclosed \" in 'a \"b'"
    assert error_of(split_line, "a 'b", "%x") == "%x: cannot split \"a 'b\": unclosed ' in \"a 'b\""


def test_split_words_is_lazy():
    words = split_words("-H a 'unclosed")
    assert [next(words), next(words)] == [("-H", 0), ("a", 3)]
    assert "unclosed ' in" in error_of(next, words)


safe_words = st.text(alphabet=string.ascii_letters + string.digits + "._-/=+,:[]@%", min_size=1, max_size=12)
quoted_words = st.one_of(
    safe_words,
    safe_words.map(lambda w: f"'{w} {w}'"),
    safe_words.map(lambda w: f'"{w}\\"{w}"'),
    safe_words.map(lambda w: f"{w}\\ {w}"),
)


@given(st.lists(quoted_words, min_size=1, max_size=8), st.sampled_from([" ", "  ", "\t"]))
def test_split_with_offsets_matches_shlex_and_points_at_each_word(words, gap):
    line = gap.join(words)
    split = list(split_words(line))
    assert [w for w, _ in split] == shlex.split(line)
    for (_, offset), raw in zip(split, words):
        assert line[offset:offset + len(raw)] == raw


# ---------------------------------------------------------------- $NAME

def test_expand_from_the_environment_then_the_notebook():
    env = {"MLP_MPI_NP": "16", "SHARED": "from-env"}
    user_ns = {"SHARED": "from-notebook", "n": 3}
    assert expand_vars("-np $MLP_MPI_NP", env) == "-np 16"
    assert expand_vars("-np ${MLP_MPI_NP}x", env) == "-np 16x"
    assert expand_vars("$SHARED", env, user_ns) == "from-env"
    assert expand_vars("-np $n", env, user_ns) == "-np 3"
    assert expand_vars("cost: $$5 and $$$n", env, user_ns) == "cost: $5 and $3"
    assert expand_vars("$n$n ${n}_x", {}, user_ns) == "33 3_x"


def test_dollar_not_followed_by_a_name_stays():
    assert expand_vars("a $ b $1 $-", {}) == "a $ b $1 $-"
    assert expand_vars("", {}) == "" and expand_vars("no names", {}, None) == "no names"


@pytest.mark.parametrize("line, message", [
    ("-np $NOPE", "unknown variable $NOPE in '-np $NOPE' (not in the environment nor the notebook)"),
    ("-np ${NOPE}", "unknown variable $NOPE in '-np ${NOPE}'"),
    ("-np ${1x}", "bad variable reference '${1x}' in '-np ${1x}'"),
    ("-np ${}", "bad variable reference '${}'"),
    ("-np ${A B}", "bad variable reference '${A B}'"),
    ("-np ${NP", "unclosed '${' in '-np ${NP'"),
])
def test_expansion_errors_name_the_variable(line, message):
    assert error_of(expand_vars, line, {}, {}).startswith(message)


def test_notebook_value_whose_str_fails():
    class Broken:
        def __str__(self):
            raise RuntimeError("no text for you")

    assert error_of(expand_vars, "-np $x", {}, {"x": Broken()}) == \
        "$x: cannot turn the notebook's Broken into text: no text for you"


# ---------------------------------------------------------------- Options and usage

def test_options_have_every_default():
    options = Options(TABLE, {})
    assert vars(options) == {"np": None, "fanout": 64, "diff": False, "group": True, "hostfile": None,
                             "hosts": None, "packages": (), "copy": None, "given": {}}


def test_options_take_the_values_and_the_spellings():
    options = Options(TABLE, {"np": 3, "group": False}, {"np": "-n", "group": "--no-group"})
    assert (options.np, options.group, options.fanout) == (3, False, 64)
    assert options.given == {"np": "-n", "group": "--no-group"}
    assert repr(Options((NP, DIFF), {"np": 3}, {"np": "-n"})) == "Options(diff=False, np=3)"


def test_options_equality():
    assert Options(TABLE, {"np": 2}) == Options(TABLE, {"np": 2})
    assert Options(TABLE, {"np": 2}) != Options(TABLE, {"np": 3})
    assert Options(TABLE, {"np": 2}, {"np": "-n"}) != Options(TABLE, {"np": 2}, {"np": "-np"})
    assert Options((NP,), {}) != Options((NP, DIFF), {})
    assert Options((NP,), {}) != {"np": None, "given": {}}


def test_usage():
    assert usage("%x", (NP, DIFF, HOSTS), "COMMAND") == (
        "usage: %x [-np N] [--diff] [-H HOSTS] COMMAND\n"
        "  -np, -n N         ranks\n"
        "  --diff            show a diff\n"
        "  -H, --host HOSTS\n")
    assert usage("%x", ()) == "usage: %x\n"
