"""allrun's options: the ``allrun`` command's argv and the ``%allrun`` / ``%%allrun`` magics' line
(the command kept exactly as written; ``$NAME`` in option values only)."""
from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mlp_magic.commands.pure.parse import allrun_argv, allrun_in_line
from mlp_magic.commands.pure.table import ALLRUN
from mlp_magic.core.options import Options
from mlp_magic.errors import MlpMagicError
from tests.unit.parser_errors import error_of

ENV = {"HOSTS_VAR": "worker[0-1]", "HOME": "/home/me"}


def fields(options) -> dict:
    return {name: value for name, value in vars(options).items() if name != "given"}


def command_options(command: str, **values) -> dict:
    """The command's options when ``values`` alone were given."""
    return {**fields(Options((*ALLRUN.options, *ALLRUN.command_options), values)), "command": command}


def magic_options(command: str, **values) -> dict:
    return {**fields(Options((*ALLRUN.options, *ALLRUN.magic_options), values)), "command": command}


def in_line(line, cell=None, user_ns=None):
    return allrun_in_line(line, cell, ENV, {} if user_ns is None else user_ns)


# ------------------------------------------------------------------ the allrun command

def test_full_command_line():
    options = allrun_argv([
        "--hostfile", "/etc/h", "-x", "worker3", "-f", "8", "--connect-timeout", "2.5", "-t", "30",
        "--ssh", "ssh -F cfg", "--no-group", "--diff", "--json", "--outdir", "out", "--",
        "pip", "install", "x>=1"])
    assert fields(options) == command_options(
        "pip install x>=1", hostfile="/etc/h", exclude="worker3", fanout=8, connect_timeout=2.5,
        timeout=30.0, ssh="ssh -F cfg", group=False, diff=True, json=True, outdir="out")


def test_defaults_and_the_command_without_separator():
    options = allrun_argv(["uname", "-a"])
    assert fields(options) == command_options("uname -a")
    assert (options.fanout, options.connect_timeout, options.timeout, options.group) == (64, 10.0, None, True)
    assert (options.copy, options.help, options.json) == (None, False, False)


@pytest.mark.parametrize("argv, field, value", [
    (["--fanout=3", "true"], "fanout", 3),
    (["-f3", "true"], "fanout", 3),
    (["-f", "3", "true"], "fanout", 3),
    (["-t0.5", "true"], "timeout", 0.5),
    (["--timeout=7", "true"], "timeout", 7.0),
    (["-H", "a,b", "true"], "hosts", "a,b"),
    (["--host", "a", "true"], "hosts", "a"),
    (["--hosts", "a", "true"], "hosts", "a"),
    (["--machinefile", "f", "true"], "hostfile", "f"),
    (["--exclude=w[1-2]", "true"], "exclude", "w[1-2]"),
    (["-xw3", "true"], "exclude", "w3"),
    (["--connect-timeout=2", "true"], "connect_timeout", 2.0),
])
def test_option_spellings(argv, field, value):
    options = allrun_argv(argv)
    assert fields(options) == command_options("true", **{field: value})


def test_options_after_the_command_belong_to_the_command():
    options = allrun_argv(["-H", "a", "ls", "-x", "-t", "--json"])
    assert options.command == "ls -x -t --json" and options.exclude is None and not options.json


def test_copy_with_and_without_dest():
    assert allrun_argv(["--copy", "w.whl", "--", "pip", "install", "w.whl"]).copy == ("w.whl", None)
    both = allrun_argv(["--copy", "w.whl", "/tmp/", "--", "ls", "/tmp"])
    assert (both.copy, both.command) == (("w.whl", "/tmp/"), "ls /tmp")
    alone = allrun_argv(["--copy", "w.whl", "--json"])
    assert (alone.copy, alone.json, alone.command) == (("w.whl", None), True, "")


def test_help():
    assert allrun_argv(["--help"]).help and allrun_argv(["-h"]).help
    assert allrun_argv(["-h", "true"]).help


@pytest.mark.parametrize("argv, words", [
    ([], "allrun: no command given (e.g. allrun -- hostname)"),
    (["--"], "no command"),
    (["-H", "a"], "no command"),
    (["-q", "true"], "allrun: unknown option '-q' (put -- before a command that starts with -)"),
    (["--fanout", "0", "true"], "allrun: --fanout: expected a positive integer, got '0'"),
    (["-f", "x", "true"], "-f: expected a positive integer, got 'x'"),
    (["-f", "\u00b2", "true"], "-f: expected a positive integer, got '\u00b2'"),
    (["-t", "-1", "true"], "-t: expected a positive number of seconds, got '-1'"),
    (["-t", "nan", "true"], "-t: expected a positive number of seconds, got 'nan'"),
    (["--connect-timeout", "inf", "true"],
     "--connect-timeout: expected a positive number of seconds, got 'inf'"),
    (["--timeout"], "allrun: --timeout needs a value"),
    (["--json=yes", "true"], "allrun: --json takes no value"),
    (["-H", "a", "--hostfile", "f", "true"], "allrun: give either -H or --hostfile, not both"),
    (["--copy"], "allrun: --copy needs a value"),
    (["--copy", "a", "b", "pip", "install"],
     "allrun: after --copy SRC [DEST], put -- before the command ('pip')"),
    (["-o", "name", "true"], "unknown option '-o'"),        # a notebook's variable: the magic's only
    (["--ssh=", "true"], "allrun: --ssh: expected a non-empty value, got ''"),
])
def test_bad_command_lines_name_the_problem(argv, words):
    message = error_of(allrun_argv, argv)
    assert words in message and message.startswith("allrun: ") and "\n" not in message


# ------------------------------------------------------------------ the magics

def test_line_magic_keeps_the_command_exactly_as_written():
    line = '-H worker[0-1] -t 5 echo "a  b" | grep -c \'a\' > "$HOME/x"'
    options = in_line(line)
    assert options.command == 'echo "a  b" | grep -c \'a\' > "$HOME/x"'   # $HOME left to the remote shell
    assert fields(options) == magic_options(options.command, hosts="worker[0-1]", timeout=5.0)


def test_line_magic_keeps_a_command_it_could_not_split():
    """Only the options are split: the command is the remote shell's, in its own quoting ($'...')."""
    assert in_line("-t 5 echo $'it\\'s'").command == "echo $'it\\'s'"
    assert in_line("-- echo 'a' \"b").command == "echo 'a' \"b"


def test_line_magic_expands_variables_in_option_values_only():
    line = "-H $HOSTS_VAR -x ${EXCL} -o res -- echo $HOSTS_VAR"
    options = in_line(line, user_ns={"EXCL": "worker1"})
    assert fields(options) == magic_options("echo $HOSTS_VAR", hosts="worker[0-1]", exclude="worker1",
                                            out="res")


def test_line_magic_expands_copy_and_keeps_spellings():
    options = in_line("--copy $HOME/w.whl /tmp/ -- pip install /tmp/w.whl")
    assert (options.copy, options.command) == (("/home/me/w.whl", "/tmp/"), "pip install /tmp/w.whl")
    assert in_line("-f2 --out=r true").given == {"fanout": "-f", "out": "--out"}


def test_cell_magic_takes_the_cell_as_the_script():
    script = "set -e\npip install x\npython -c 'import x'\n"
    options = in_line("--fanout 4 --diff", script)
    assert fields(options) == magic_options(script, fanout=4, diff=True)
    assert in_line("", "hostname\n").command == "hostname\n"


def test_the_magic_takes_json_as_the_command_does():
    """The install guide lists --json for %allrun and allrun alike (issue 49: the magic refused it)."""
    assert in_line("--json echo hi", None).json and in_line("--json", "echo hi\n").json


@pytest.mark.parametrize("line, cell, words", [
    ("", None, "%allrun: no command given (e.g. %allrun -- hostname)"),
    ("-H a", None, "no command"),
    ("", "", "%%allrun: no command"),
    ("-H $NOPE_NOT_SET true", None, "unknown variable $NOPE_NOT_SET"),
    ("-H 'unclosed true", None, "unclosed '"),
    ("--jsn true", None, "%allrun: unknown option '--jsn' (put -- before a command that starts with -)"),
    ("--help", None, "unknown option '--help'"),
    ("-o 3x true", None, "%allrun: -o: expected a Python name, got '3x'"),
    ("-f 0 true", None, "-f: expected a positive integer, got '0'"),
    ("-H a --hostfile f true", None, "give either -H or --hostfile, not both"),
    ("--copy a b true", None, "put -- before the command ('true')"),
    ("echo hi", "ls\n",
     "%%allrun: the first line takes options only, the cell is the script (found 'echo hi')"),
])
def test_bad_magic_lines(line, cell, words):
    message = error_of(in_line, line, cell)
    assert words in message and "\n" not in message
    assert message.startswith("%%allrun: " if cell is not None else "%allrun: ")


@settings(max_examples=300)
@given(st.lists(st.one_of(st.text(max_size=8), st.sampled_from(
    ["-H", "-x", "-f", "-t", "--copy", "--", "--json", "--ssh", "--outdir", "--fanout=", "-o", "--diff"])),
    max_size=8))
@example(["-f", "\u00b2"])   # '²'.isdigit() is True, int('²') raises ValueError
def test_only_our_error_escapes_the_command_parser(argv):
    try:
        allrun_argv(argv)
    except MlpMagicError as error:
        assert str(error)


@settings(max_examples=300)
@given(st.text(max_size=40), st.one_of(st.none(), st.text(max_size=10)))
def test_only_our_error_escapes_the_magic_parser(line, cell):
    try:
        allrun_in_line(line, cell, ENV, {})
    except MlpMagicError as error:
        assert str(error)
