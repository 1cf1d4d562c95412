"""%%mpirun's argument line: $VAR expansion, every option, and one MlpMagicError for every bad value."""
from __future__ import annotations

import argparse

import pytest

from mlp_magic.core.line_args import LineParser, expand_vars, split_line
from mlp_magic.errors import MlpMagicError
from mlp_magic.mpirun.args import MpirunArgs, add_host_options, check_form, parse_mpirun_args
from tests.unit.parser_errors import error_of


def parse(line, env=None, user_ns=None):
    return parse_mpirun_args(line, {} if env is None else env, user_ns)


# ---------------------------------------------------------------- $VAR expansion

def test_expand_from_the_environment_then_the_notebook():
    env = {"MLP_MPI_NP": "16", "SHARED": "from-env"}
    user_ns = {"SHARED": "from-notebook", "n": 3}
    assert expand_vars("-np $MLP_MPI_NP", env) == "-np 16"
    assert expand_vars("-np ${MLP_MPI_NP}x", env) == "-np 16x"
    assert expand_vars("$SHARED", env, user_ns) == "from-env"
    assert expand_vars("-np $n", env, user_ns) == "-np 3"
    assert expand_vars("cost: $$5 and $$$n", env, user_ns) == "cost: $5 and $3"


def test_dollar_not_followed_by_a_name_stays():
    assert expand_vars("a $ b $1 $-", {}) == "a $ b $1 $-"


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


def test_expansion_happens_before_splitting():
    args = parse("$OPTS", {"OPTS": "-np 4 --diff"})
    assert (args.np, args.diff) == (4, True)
    assert parse('--log-dir "$D/x y"', {"D": "/tmp"}).log_dir == "/tmp/x y"


# ---------------------------------------------------------------- every option

def test_defaults():
    assert parse("") == MpirunArgs()
    assert parse("   ") == MpirunArgs()


@pytest.mark.parametrize("line, field, value", [
    ("-np 4", "np", 4),
    ("-n 4", "np", 4),
    ("-np=4", "np", 4),
    ("-n4", "np", 4),
    ("-np 0008", "np", 8),
    ("--hostfile /etc/mlp/hostfile", "hostfile", "/etc/mlp/hostfile"),
    ("--machinefile=hf", "hostfile", "hf"),
    ("-H worker0:8,worker1:8", "hosts", "worker0:8,worker1:8"),
    ("--host aa,aa,bb", "hosts", "aa,aa,bb"),
    ("--oversubscribe", "oversubscribe", True),
    ("--ranks 0,2-3", "ranks", "0,2-3"),
    ("--targets all", "ranks", "all"),
    ("--timeout 60", "timeout", 60.0),
    ("--timeout 0.5", "timeout", 0.5),
    ("--timeout=1e3", "timeout", 1000.0),
    ("--no-group", "group", False),
    ("--diff", "diff", True),
    ("--no-fold", "fold", False),
    ("--all-outputs", "all_outputs", True),
    ("-o res", "out", "res"),
    ("--out r\u00e9sultat", "out", "r\u00e9sultat"),
    ("--log-dir /tmp/logs", "log_dir", "/tmp/logs"),
    ("--restart", "restart", True),
    ("--status", "status", True),
    ("--stop", "stop", True),
    ("--pull w", "pull", "w"),
    ("--push w", "push", "w"),
    ("--compare w", "compare", "w"),
])
def test_each_option(line, field, value):
    args = parse(line)
    assert getattr(args, field) == value
    untouched = {k: v for k, v in vars(args).items() if k != field}
    assert untouched == {k: v for k, v in vars(MpirunArgs()).items() if k != field}


def test_a_full_line():
    args = parse("-np $MLP_MPI_NP -H $MLP_MPI_HOSTS --ranks 0,3 --timeout 60 --no-group --diff -o out "
                 "--restart --oversubscribe --all-outputs --log-dir '/tmp/my logs'",
                 {"MLP_MPI_NP": "16", "MLP_MPI_HOSTS": "worker0:8,worker1:8"})
    assert args == MpirunArgs(np=16, hosts="worker0:8,worker1:8", ranks="0,3", timeout=60.0, group=False,
                              diff=True, out="out", restart=True, oversubscribe=True, all_outputs=True,
                              log_dir="/tmp/my logs")


# ---------------------------------------------------------------- bad values

@pytest.mark.parametrize("line, parts", [
    ("-np 0", ["argument -np/-n: expected a positive integer, got '0'"]),
    ("-np x", ["got 'x'"]),
    ("-np -1", ["got '-1'"]),
    ("-np 2.5", ["got '2.5'"]),
    ("-np \u00b2", ["got '\u00b2'"]),
    ("-np " + "9" * 5000, ["'99999999999999999999'... is far too large"]),
    ("-np", ["argument -np/-n: expected one argument"]),
    ("--timeout -1", ["argument --timeout: expected a positive number of seconds, got '-1'"]),
    ("--timeout 0", ["got '0'"]),
    ("--timeout nan", ["got 'nan'"]),
    ("--timeout inf", ["got 'inf'"]),
    ("--timeout 1e400", ["got '1e400'"]),
    ("--timeout soon", ["argument --timeout: expected seconds, got 'soon'"]),
    ("-o 1abc", ["argument -o/--out: expected a Python name, got '1abc'"]),
    ("-o class", ["expected a Python name, got 'class'"]),
    ("-o a-b", ["got 'a-b'"]),
    ("-np '4", ["cannot split \"-np '4\": No closing quotation"]),
    ('-H "a:1', ["No closing quotation"]),
    ("--frobnicate", ["unrecognized arguments: --frobnicate"]),
    ("--rank 0", ["unrecognized arguments: --rank"]),          # no abbreviations
    ("-h", ["unrecognized arguments: -h"]),
    ("--help", ["unrecognized arguments: --help"]),
    ("--hostfile f -H a:1", ["argument -H/--host: not allowed with argument --hostfile/--machinefile"]),
    ("--status --stop", ["%mpirun: give one of --status, --stop, --restart or --stacks"]),
    ("--stacks --stop", ["give one of --status, --stop, --restart or --stacks"]),
    ("--stop --restart", ["give one of --status, --stop, --restart or --stacks"]),
    ("--frame 1", ["--frame goes with --post-mortem"]),
    ("--post-mortem --frame -1", ["argument --frame: expected a frame number (0 is the innermost), "
                                  "got '-1'"]),
    ("--post-mortem --frame x", ["got 'x'"]),
    ("--post-mortem --frame 1.0", ["got '1.0'"]),
    ("--post-mortem --frame " + "9" * 40, ["got '99999999999999999999'"]),
    ("--post-mortem --where", ["%mpirun: --post-mortem and --where do not go together"]),
    ("--where train.py", ["a script and --where do not go together"]),
    ("--stop train.py", ["a script and --stop do not go together"]),
    ("--where -np 4", ["-np does not go with --post-mortem or --where"]),
    ("--post-mortem -H a:1", ["-H does not go with"]),
    ("--post-mortem --restart", ["--restart does not go with"]),
    ("--where --oversubscribe", ["--oversubscribe does not go with"]),
    ("--pull 1x", ["argument --pull: expected a Python name, got '1x'"]),
    ("--push a.b", ["argument --push: expected a Python name, got 'a.b'"]),
    ("--pull a --push b", ["--compare, --pull and --push go alone"]),
    ("--stop --compare x", ["--compare, --pull and --push go alone"]),
    ("--compare", ["%mpirun: --compare: give an expression, the rest of the line"]),
    ("--compare -o c", ["--compare: give an expression"]),
    ("--compare x --no-group", ["%mpirun: --compare takes the rest of the line, --no-group included"]),
    ("-np 4 --compare x", ["%mpirun: -np does not go with --compare, --pull or --push"]),
    ("--pull w --diff", ["--diff does not go with --compare, --pull or --push"]),
    ("--push w --no-fold", ["--no-fold does not go with"]),
])
def test_bad_values_give_one_error_naming_the_value(line, parts, capsys):
    message = error_of(parse, line)
    for part in parts:
        assert part in message
    assert message.startswith("%%mpirun: ") or message.startswith("%mpirun: ")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""   # argparse printed no usage


@pytest.mark.parametrize("line, expr, rest", [
    ("--compare model.state_dict()['fc.weight']", "model.state_dict()['fc.weight']", {}),
    ("--compare sd --ranks 1-3 -o cmp", "sd", {"ranks": "1-3", "out": "cmp"}),
    ("-o cmp --compare sd --timeout=5", "sd", {"out": "cmp", "timeout": 5.0}),
    ("--compare --ranks 0,2 -o c w[0] + 1", "w[0] + 1", {"ranks": "0,2", "out": "c"}),
    ("--compare 'a + b'", "a + b", {}),
    ("--compare x$y", "x$y", {}),                  # no $NAME expansion inside the expression
    ("--compare=grad.norm()", "grad.norm()", {}),
    ("--compare -x", "-x", {}),
])
def test_compare_takes_the_rest_of_the_line(line, expr, rest):
    args = parse(line)
    assert args.compare == expr
    assert {k: v for k, v in vars(args).items() if k != "compare" and v != getattr(MpirunArgs(), k)} == rest


def test_argparse_never_exits():
    parser = LineParser(prog="%x", add_help=True)
    assert error_of(parser.parse_args, ["--help"]).startswith("%x: ")   # help action calls exit()
    assert error_of(parser.exit, 2, "bye\n") == "%x: bye"
    assert error_of(parser.exit) == "%x: stopped"


def test_split_line():
    assert split_line("-H 'a b' \"c d\" e\\ f", "%x") == ["-H", "a b", "c d", "e f"]
    assert error_of(split_line, 'a "b', "%allrun") == "%allrun: cannot split 'a \"b': No closing quotation"


def test_add_host_options_are_exclusive():
    parser = LineParser(prog="%allrun", add_help=False)
    add_host_options(parser)
    assert vars(parser.parse_args(["--machinefile", "f"])) == {"hostfile": "f", "hosts": None}
    assert vars(parser.parse_args(["-H", "a,b"])) == {"hostfile": None, "hosts": "a,b"}
    assert "not allowed with" in error_of(parser.parse_args, ["-H", "a", "--hostfile", "f"])


def test_the_parser_is_a_subclass_of_argparse():
    assert issubclass(LineParser, argparse.ArgumentParser)


# ---------------------------------------------------------------- a script, --post-mortem, --where

@pytest.mark.parametrize("line, script, script_args, fields", [
    ("train.py", "train.py", (), {}),
    ("train.py --lr 0.5 --timeout 3", "train.py", ("--lr", "0.5", "--timeout", "3"), {}),  # the script's
    ("--timeout 3 train.py --lr 0.5", "train.py", ("--lr", "0.5"), {"timeout": 3.0}),
    ("-np 4 -o res dir/t.py a b", "dir/t.py", ("a", "b"), {"np": 4, "out": "res"}),
    ("-np=4 --ranks 1-2 t.py", "t.py", (), {"np": 4, "ranks": "1-2"}),
    ("-n4 t.py -n 2", "t.py", ("-n", "2"), {"np": 4}),
    ("--diff --no-group t.py", "t.py", (), {"diff": True, "group": False}),
    ("-- -odd-name.py -x", "-odd-name.py", ("-x",), {}),
    ("'my script.py' 'an arg'", "my script.py", ("an arg",), {}),
    ("--restart t.py", "t.py", (), {"restart": True}),
    ("eval.py --compare baseline", "eval.py", ("--compare", "baseline"), {}),   # the script's option
    ("-np 2 eval.py --compare=a --pull", "eval.py", ("--compare=a", "--pull"), {"np": 2}),
])
def test_a_script_and_its_arguments(line, script, script_args, fields):
    args = parse(line)
    assert (args.script, args.script_args) == (script, script_args)
    assert args == MpirunArgs(**fields, script=script, script_args=script_args)


def test_a_script_path_may_come_from_a_variable():
    args = parse("$SCRIPT --lr $LR", {"SCRIPT": "/data/train.py", "LR": "0.5"})
    assert (args.script, args.script_args) == ("/data/train.py", ("--lr", "0.5"))


@pytest.mark.parametrize("line, fields", [
    ("--post-mortem", {"post_mortem": True}),
    ("--post-mortem --frame 0", {"post_mortem": True, "frame": 0}),
    ("--post-mortem --frame 2 --ranks 1,3", {"post_mortem": True, "frame": 2, "ranks": "1,3"}),
    ("--post-mortem --frame=007 -o pm --timeout 5",
     {"post_mortem": True, "frame": 7, "out": "pm", "timeout": 5.0}),
    ("--where", {"where": True}),
    ("--where --ranks 2 --no-group", {"where": True, "ranks": "2", "group": False}),
])
def test_post_mortem_and_where(line, fields):
    args = parse(line)
    assert args == MpirunArgs(**fields)


@pytest.mark.parametrize("line, cell, message", [
    ("--where", True, "%%mpirun: --status, --stop, --stacks and --where are line forms"),
    ("--stacks", True, "are line forms"),
    ("train.py", True, "%%mpirun: 'train.py' looks like a script, which the line form runs"),
    ("-np 4 extra", True, "'extra' looks like a script"),
    ("--post-mortem", False, "%mpirun: --post-mortem runs a cell: %%mpirun --post-mortem"),
])
def test_each_form_takes_its_own_options(line, cell, message):
    assert message in error_of(check_form, parse(line), cell)


@pytest.mark.parametrize("line, cell", [
    ("", True), ("", False), ("--where", False), ("t.py", False), ("--post-mortem", True), ("--stop", False),
])
def test_the_forms_that_are_fine(line, cell):
    check_form(parse(line), cell)


def test_check_form_raises_our_error_only():
    with pytest.raises(MlpMagicError):
        check_form(parse("x.py"), True)
