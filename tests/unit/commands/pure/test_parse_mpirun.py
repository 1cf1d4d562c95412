"""%mpirun's and %%mpirun's line: the verb it names, every option, $NAME expanded before splitting,
a script and its arguments, --compare's expression, and one MlpMagicError for every bad line."""
from __future__ import annotations

import pytest

from mlp_magic.commands.pure.parse import choose_in_line
from mlp_magic.commands.pure.table import MPIRUN, options_for
from mlp_magic.errors import MlpMagicError
from tests.unit.parser_errors import error_of

LINE, CELL = None, "print(1)\n"     # %mpirun (cell=None) and %%mpirun
VERBS = {verb.name: verb for verb in MPIRUN}


def choose(line, cell=CELL, env=None, user_ns=None):
    return choose_in_line("mpirun", line, cell, {} if env is None else env, user_ns)


def fields(options) -> dict:
    return {name: value for name, value in vars(options).items() if name != "given"}


def defaults(verb: str, **changed) -> dict:
    """What the verb's options are when ``changed`` alone was given."""
    found = fields(options_for(VERBS[verb]))
    found.update(script=None, script_args=(), expression=None, name=None)
    return {**found, **changed}


# ---------------------------------------------------------------- $NAME, expanded before splitting

def test_expansion_happens_before_splitting():
    choice = choose("$OPTS", env={"OPTS": "-np 4 --diff"})
    assert choice.verb.name == "cell" and (choice.options.np, choice.options.diff) == (4, True)
    assert choose('--log-dir "$D/x y"', env={"D": "/tmp"}).options.log_dir == "/tmp/x y"
    assert choose("-np $n", user_ns={"n": 3}).options.np == 3
    assert choose("-np $NP", env={"NP": "2"}, user_ns={"NP": "9"}).options.np == 2   # the environment first


@pytest.mark.parametrize("line, cell, message", [
    ("-np $NOPE", CELL, "%%mpirun: unknown variable $NOPE in '-np $NOPE' (not in the environment nor the "
                        "notebook)"),
    ("--where $NOPE", LINE, "%mpirun: unknown variable $NOPE in '--where $NOPE'"),
    ("-np ${1x}", CELL, "%%mpirun: bad variable reference '${1x}'"),
    ("-np ${NP", CELL, "%%mpirun: unclosed '${' in '-np ${NP'"),
    ("-np $NP", CELL, "%%mpirun: -np: expected a positive integer, got '0' (the line '-np $NP' expanded to "
                      "'-np 0')"),
    ("$OPTS", CELL, "%%mpirun: unknown option '--nope' (the line '$OPTS' expanded to '--nope')"),
    ("-np 2 $S", CELL, "%%mpirun: 't.py' looks like a script, which the line form runs (%mpirun script.py "
                       "args); the cell form takes options only "
                       "(the line '-np 2 $S' expanded to '-np 2 t.py')"),
    ("$W -np 2", LINE, "%mpirun: -np does not go with --where (the line '$W -np 2' expanded to "
                       "'--where -np 2')"),
])
def test_expansion_errors_name_the_magic_and_the_variable(line, cell, message):
    env = {"NP": "0", "OPTS": "--nope", "S": "t.py", "W": "--where"}
    assert error_of(choose, line, cell, env).startswith(message)


def test_a_notebook_value_whose_str_fails():
    class Broken:
        def __str__(self):
            raise RuntimeError("no text for you")

    assert error_of(choose, "-np $x", CELL, {}, {"x": Broken()}) == \
        "%%mpirun: $x: cannot turn the notebook's Broken into text: no text for you"


# ---------------------------------------------------------------- every option

@pytest.mark.parametrize("line, cell, verb", [("", CELL, "cell"), ("   ", CELL, "cell"), ("--", CELL, "cell"),
                                              ("", LINE, "status"), ("  ", LINE, "status")])
def test_defaults(line, cell, verb):
    choice = choose(line, cell)
    assert choice.verb.name == verb and fields(choice.options) == defaults(verb)


@pytest.mark.parametrize("line, cell, verb, field, value", [
    ("-np 4", CELL, "cell", "np", 4),
    ("-n 4", CELL, "cell", "np", 4),
    ("-np=4", CELL, "cell", "np", 4),
    ("-n4", CELL, "cell", "np", 4),
    ("-np 0008", CELL, "cell", "np", 8),
    ("--hostfile /etc/mlp/hostfile", CELL, "cell", "hostfile", "/etc/mlp/hostfile"),
    ("--machinefile=hf", CELL, "cell", "hostfile", "hf"),
    ("-H worker0:8,worker1:8", CELL, "cell", "hosts", "worker0:8,worker1:8"),
    ("--host aa,aa,bb", CELL, "cell", "hosts", "aa,aa,bb"),
    ("--oversubscribe", CELL, "cell", "oversubscribe", True),
    ("--ranks 0,2-3", CELL, "cell", "ranks", "0,2-3"),
    ("--targets all", CELL, "cell", "ranks", "all"),
    ("--timeout 60", CELL, "cell", "timeout", 60.0),
    ("--timeout 0.5", CELL, "cell", "timeout", 0.5),
    ("--timeout=1e3", CELL, "cell", "timeout", 1000.0),
    ("--no-group", CELL, "cell", "group", False),
    ("--diff", CELL, "cell", "diff", True),
    ("--no-fold", CELL, "cell", "fold", False),
    ("--all-outputs", CELL, "cell", "all_outputs", True),
    ("-o res", CELL, "cell", "out", "res"),
    ("--out r\u00e9sultat", CELL, "cell", "out", "r\u00e9sultat"),
    ("--log-dir /tmp/logs", CELL, "cell", "log_dir", "/tmp/logs"),
    ("--restart", CELL, "cell", "restart", True),          # in a cell: an option of the cell verb
    ("--status", LINE, "status", None, None),
    ("--stop", LINE, "stop", None, None),
    ("--stacks", LINE, "stacks", None, None),
    ("--stacks --log-dir /tmp/x", LINE, "stacks", "log_dir", "/tmp/x"),
    ("--where", LINE, "where", None, None),
    ("--post-mortem", CELL, "post-mortem", None, None),
    ("--pull w", LINE, "pull", "name", "w"),
    ("--pull=w", LINE, "pull", "name", "w"),
    ("--push w", LINE, "push", "name", "w"),
    ("--compare w", LINE, "compare", "expression", "w"),
])
def test_each_option(line, cell, verb, field, value):
    choice = choose(line, cell)
    assert choice.verb.name == verb
    assert fields(choice.options) == defaults(verb, **({} if field is None else {field: value}))


def test_a_full_line():
    choice = choose("-np $MLP_MPI_NP -H $MLP_MPI_HOSTS --ranks 0,3 --timeout 60 --no-group --diff -o out "
                    "--restart --oversubscribe --all-outputs --log-dir '/tmp/my logs'", CELL,
                    {"MLP_MPI_NP": "16", "MLP_MPI_HOSTS": "worker0:8,worker1:8"})
    assert choice.verb.name == "cell"
    assert fields(choice.options) == defaults(
        "cell", np=16, hosts="worker0:8,worker1:8", ranks="0,3", timeout=60.0, group=False, diff=True,
        out="out", restart=True, oversubscribe=True, all_outputs=True, log_dir="/tmp/my logs")
    assert choice.options.given["np"] == "-np" and choice.options.given["hosts"] == "-H"


# ---------------------------------------------------------------- --restart: a verb, or an option

@pytest.mark.parametrize("line, fields_given", [
    ("--restart", {}),
    ("--restart -np 2", {"np": 2}),
    ("-np 2 --restart", {"np": 2}),
    ("--restart -np 2 -H a:2", {"np": 2, "hosts": "a:2"}),
    ("--restart --hostfile hf --oversubscribe", {"hostfile": "hf", "oversubscribe": True}),
])
def test_restart_alone_on_the_line_is_the_restart_verb(line, fields_given):
    choice = choose(line, LINE)
    assert choice.verb.name == "restart"
    expected = {"np": None, "hostfile": None, "hosts": None, "oversubscribe": False, **fields_given}
    assert {name: getattr(choice.options, name) for name in expected} == expected
    assert choice.options.script is None and choice.options.given["verb:restart"] == "--restart"


def test_restart_in_a_cell_or_before_a_script_is_an_option():
    cell = choose("--restart -np 2", CELL)
    assert (cell.verb.name, cell.options.restart, cell.options.np) == ("cell", True, 2)
    script = choose("--restart t.py", LINE)
    assert (script.verb.name, script.options.restart, script.options.script) == ("script", True, "t.py")


# ---------------------------------------------------------------- a script, --post-mortem, --where

@pytest.mark.parametrize("line, script, script_args, changed", [
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
    ("t.py --stop --where", "t.py", ("--stop", "--where"), {}),
    ("-np 2 -- t.py", "t.py", (), {"np": 2}),
])
def test_a_script_and_its_arguments(line, script, script_args, changed):
    choice = choose(line, LINE)
    assert choice.verb.name == "script"
    assert (choice.options.script, choice.options.script_args) == (script, script_args)
    assert fields(choice.options) == defaults("script", **changed, script=script, script_args=script_args)


def test_a_script_path_may_come_from_a_variable():
    choice = choose("$SCRIPT --lr $LR", LINE, {"SCRIPT": "/data/train.py", "LR": "0.5"})
    assert choice.verb.name == "script"
    assert (choice.options.script, choice.options.script_args) == ("/data/train.py", ("--lr", "0.5"))


@pytest.mark.parametrize("line, cell, verb, changed", [
    ("--post-mortem", CELL, "post-mortem", {}),
    ("--post-mortem --frame 0", CELL, "post-mortem", {"frame": 0}),
    ("--post-mortem --frame 2 --ranks 1,3", CELL, "post-mortem", {"frame": 2, "ranks": "1,3"}),
    ("--post-mortem --frame=007 -o pm --timeout 5", CELL, "post-mortem",
     {"frame": 7, "out": "pm", "timeout": 5.0}),
    ("--where", LINE, "where", {}),
    ("--where --ranks 2 --no-group", LINE, "where", {"ranks": "2", "group": False}),
    ("--unblock", LINE, "unblock", {}),
    ("--unblock --ranks 0-2", LINE, "unblock", {"ranks": "0-2"}),
])
def test_post_mortem_and_where(line, cell, verb, changed):
    choice = choose(line, cell)
    assert choice.verb.name == verb and fields(choice.options) == defaults(verb, **changed)


# ---------------------------------------------------------------- --compare, --pull, --push

@pytest.mark.parametrize("line, expr, changed", [
    ("--compare model.state_dict()['fc.weight']", "model.state_dict()['fc.weight']", {}),
    ("--compare sd --ranks 1-3 -o cmp", "sd", {"ranks": "1-3", "out": "cmp"}),
    ("-o cmp --compare sd --timeout=5", "sd", {"out": "cmp", "timeout": 5.0}),
    ("--compare --ranks 0,2 -o c w[0] + 1", "w[0] + 1", {"ranks": "0,2", "out": "c"}),
    ("--compare 'a + b'", "a + b", {}),
    ("--compare x$y", "x$y", {}),                  # no $NAME expansion inside the expression
    ("--compare=grad.norm()", "grad.norm()", {}),
    ("--compare -x", "-x", {}),
    ("--ranks $R --compare w$x --timeout $T", "w$x", {"ranks": "1", "timeout": 2.0}),   # options expanded
])
def test_compare_takes_the_rest_of_the_line(line, expr, changed):
    choice = choose(line, LINE, {"R": "1", "T": "2"})
    assert choice.verb.name == "compare"
    assert fields(choice.options) == defaults("compare", expression=expr, **changed)


@pytest.mark.parametrize("line, verb, changed", [
    ("--pull w -o x --ranks 1", "pull", {"name": "w", "out": "x", "ranks": "1"}),
    ("--push w --timeout 2", "push", {"name": "w", "timeout": 2.0}),
    ("--push $V", "push", {"name": "weights"}),
])
def test_pull_and_push_name_a_variable(line, verb, changed):
    choice = choose(line, LINE, {"V": "weights"})
    assert choice.verb.name == verb and fields(choice.options) == defaults(verb, **changed)


# ---------------------------------------------------------------- --pdb, --break

@pytest.mark.parametrize("line, cell, command, changed", [
    ("--pdb p loss", LINE, "p loss", {}),
    ("--pdb", LINE, "", {}),
    ("--pdb p x['a'] --ranks 1-3", LINE, "p x['a']", {"ranks": "1-3"}),
    ("--ranks 0 --pdb n", LINE, "n", {"ranks": "0"}),
    ("--pdb !y = $z --timeout 5", LINE, "!y = $z", {"timeout": 5.0}),   # no $NAME expansion in it
    ("--pdb", CELL, "", {}),                                           # %%mpirun --pdb: a block
    ("--pdb --ranks 2", CELL, "", {"ranks": "2"}),
])
def test_pdb_takes_the_rest_of_the_line_as_a_pdb_command(line, cell, command, changed):
    choice = choose(line, cell)
    assert choice.verb.name == "pdb"
    assert fields(choice.options) == defaults("pdb", expression=command, **changed)


@pytest.mark.parametrize("line, location, changed", [
    ("--break train.py:42", ("train.py", 42), {}),
    ("--break cell:3 --ranks 0-1 --if 'loss > 1'", ("cell", 3), {"ranks": "0-1", "condition": "loss > 1"}),
    ("--break /a:b/c.py:7", ("/a:b/c.py", 7), {}),
    ("--break clear", "clear", {}),
])
def test_break_names_a_file_and_line(line, location, changed):
    choice = choose(line, LINE)
    assert choice.verb.name == "break" and choice.options.name == location
    assert fields(choice.options) == defaults("break", name=location, **changed)


@pytest.mark.parametrize("line, part", [
    ("--break x.py", "expected FILE:LINE"),
    ("--break x.py:0", "expected FILE:LINE"),
    ("--break :3", "expected FILE:LINE"),
    ("--break x.py:3 --pdb p 1", "--break and --pdb do not go together"),
    ("--pdb p 1 --if x", "--pdb takes the rest of the line, --if included"),
])
def test_bad_pdb_and_break_lines_are_one_line(line, part):
    with pytest.raises(MlpMagicError) as error:
        choose(line, LINE)
    assert part in str(error.value) and "\n" not in str(error.value)


# ---------------------------------------------------------------- bad lines

@pytest.mark.parametrize("line, cell, parts", [
    ("-np 0", CELL, ["%%mpirun: -np: expected a positive integer, got '0'"]),
    ("-np x", CELL, ["-np", "got 'x'"]),
    ("-np -1", CELL, ["-np", "got '-1'"]),
    ("-np 2.5", CELL, ["-np", "got '2.5'"]),
    ("-np \u00b2", CELL, ["-np", "got '\u00b2'"]),
    ("-np " + "9" * 5000, CELL, ["-np", "'99999999999999999999'..."]),
    ("-np", CELL, ["%%mpirun: -np needs a value"]),
    ("--timeout -1", CELL, ["%%mpirun: --timeout: expected a positive number of seconds, got '-1'"]),
    ("--timeout 0", CELL, ["--timeout", "got '0'"]),
    ("--timeout nan", CELL, ["--timeout", "got 'nan'"]),
    ("--timeout inf", CELL, ["--timeout", "got 'inf'"]),
    ("--timeout 1e400", CELL, ["--timeout", "got '1e400'"]),
    ("--timeout soon", CELL, ["--timeout", "got 'soon'"]),
    ("-o 1abc", CELL, ["%%mpirun: -o: expected a Python name, got '1abc'"]),
    ("-o class", CELL, ["expected a Python name, got 'class'"]),
    ("-o a-b", CELL, ["-o", "got 'a-b'"]),
    ("--ranks ''", CELL, ["%%mpirun: --ranks: expected a non-empty value, got ''"]),
    ("-np '4", CELL, ["cannot split \"-np '4\": unclosed '"]),
    ('-H "a:1', CELL, ['unclosed "']),
    ("--frobnicate", CELL, ["%%mpirun: unknown option '--frobnicate'"]),
    ("--rank 0", CELL, ["unknown option '--rank'"]),          # no abbreviations
    ("-h", CELL, ["unknown option '-h'"]),
    ("--help", LINE, ["%mpirun: unknown option '--help'"]),
    ("--hostfile f -H a:1", CELL, ["%%mpirun: give either --hostfile or -H, not both"]),
    ("--status --stop", LINE, ["%mpirun: --status and --stop do not go together"]),
    ("--stacks --stop", LINE, ["--stop and --stacks do not go together"]),
    ("--stop --restart", LINE, ["--stop and --restart do not go together"]),
    ("--frame 1", CELL, ["%%mpirun: --frame does not go with %%mpirun"]),
    ("--frame 1", LINE, ["%mpirun: --frame does not go with --status (%mpirun alone)"]),
    ("--frame 1 t.py", LINE, ["--frame does not go with a script"]),
    ("--post-mortem --frame -1", CELL, ["%%mpirun: --frame: expected a frame number (0 is the innermost), "
                                        "got '-1'"]),
    ("--post-mortem --frame x", CELL, ["--frame", "got 'x'"]),
    ("--post-mortem --frame 1.0", CELL, ["--frame", "got '1.0'"]),
    ("--post-mortem --frame " + "9" * 40, CELL, ["--frame", "got '99999999999999999999'"]),
    ("--post-mortem --where", CELL, ["%%mpirun: --post-mortem and --where do not go together"]),
    ("--where train.py", LINE, ["--where and a script do not go together"]),
    ("--stop train.py", LINE, ["--stop and a script do not go together"]),
    ("--where -np 4", LINE, ["%mpirun: -np does not go with --where"]),
    ("--post-mortem -H a:1", CELL, ["-H does not go with --post-mortem"]),
    ("--post-mortem --restart", CELL, ["--restart does not go with --post-mortem"]),
    ("--where --oversubscribe", LINE, ["--oversubscribe does not go with --where"]),
    ("--where --restart", LINE, ["--where and --restart do not go together"]),
    ("--pull 1x", LINE, ["%mpirun: --pull: expected a Python name, got '1x'"]),
    ("--push a.b", LINE, ["%mpirun: --push: expected a Python name, got 'a.b'"]),
    ("--pull", LINE, ["%mpirun: --pull needs a value"]),
    ("--pull a --push b", LINE, ["--pull and --push do not go together"]),
    ("--stop --compare x", LINE, ["--stop and --compare do not go together"]),
    ("--pull w --compare x", LINE, ["--compare and --pull do not go together"]),
    ("--restart --pull w", LINE, ["--restart and --pull do not go together"]),
    ("--compare", LINE, ["%mpirun: --compare: give an expression, the rest of the line"]),
    ("--compare -o c", LINE, ["--compare: give an expression"]),
    ("--compare x --no-group", LINE, ["%mpirun: --compare takes the rest of the line, --no-group included"]),
    ("--compare x --pull w", LINE, ["--compare takes the rest of the line, --pull included"]),
    ("-np 4 --compare x", LINE, ["%mpirun: -np does not go with --compare"]),
    ("--pull w --diff", LINE, ["%mpirun: --diff does not go with --pull"]),
    ("--push w --no-fold", LINE, ["--no-fold does not go with --push"]),
    ("-np 4", LINE, ["%mpirun: -np does not go with --status (%mpirun alone)"]),
    ("--unblock --timeout 5", LINE, ["%mpirun: --timeout does not go with --unblock"]),
    ("--unblock --restart", LINE, ["--restart and --unblock do not go together"]),
    ("--unblock", CELL, ["%%mpirun: --unblock"]),
])
def test_bad_values_give_one_error_naming_the_value(line, cell, parts, capsys):
    message = error_of(choose, line, cell)
    for part in parts:
        assert part in message
    assert message.startswith("%%mpirun: " if cell is not None else "%mpirun: ")
    assert "\n" not in message
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""   # no usage printed


# ---------------------------------------------------------------- the forms

@pytest.mark.parametrize("line, cell, message", [
    ("--where", CELL, "%%mpirun: --where is a line form (%mpirun --where)"),
    ("--stacks", CELL, "%%mpirun: --stacks is a line form"),
    ("--stop", CELL, "%%mpirun: --stop is a line form (%mpirun --stop)"),
    ("--status", CELL, "%%mpirun: --status is a line form"),
    ("--pull w", CELL, "%%mpirun: --pull is a line form"),
    ("--push w", CELL, "%%mpirun: --push is a line form"),
    ("-np 4 --compare x", CELL, "%%mpirun: --compare is a line form"),
    ("train.py", CELL, "%%mpirun: 'train.py' looks like a script, which the line form runs"),
    ("--restart t.py", CELL, "%%mpirun: 't.py' looks like a script"),
    ("-np 4 extra", CELL, "'extra' looks like a script"),
    ("--post-mortem", LINE, "%mpirun: --post-mortem runs a cell: %%mpirun --post-mortem, then the code"),
    ("--post-mortem -H a:1", LINE, "%mpirun: --post-mortem runs a cell"),
])
def test_each_form_takes_its_own_options(line, cell, message):
    assert message in error_of(choose, line, cell)


@pytest.mark.parametrize("line, cell, verb", [
    ("", CELL, "cell"), ("", LINE, "status"), ("--where", LINE, "where"), ("t.py", LINE, "script"),
    ("--post-mortem", CELL, "post-mortem"), ("--stop", LINE, "stop"), ("--status", LINE, "status"),
    ("--stacks", LINE, "stacks"), ("--restart", LINE, "restart"), ("--restart", CELL, "cell"),
    ("--compare x", LINE, "compare"), ("--pull x", LINE, "pull"), ("--push x", LINE, "push"),
])
def test_the_forms_that_are_fine(line, cell, verb):
    assert choose(line, cell).verb.name == verb
