"""allrun's pure parts: the option parser (command and magic line), host checks, exit status."""
from __future__ import annotations

import shlex
import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mlp_magic.config import ssh_command
from mlp_magic.core.results import HostResult
from mlp_magic.errors import MlpMagicError
from mlp_magic.allrun.options import AllrunOptions, parse_allrun_argv, parse_allrun_line, split_with_offsets
from mlp_magic.allrun.report import exit_status, footer
from mlp_magic.ssh.argv import as_target, as_targets

ENV = {"HOSTS_VAR": "worker[0-1]", "HOME": "/home/me"}


# ------------------------------------------------------------------ the allrun command


def test_full_command_line():
    options = parse_allrun_argv([
        "--hostfile", "/etc/h", "-x", "worker3", "-f", "8", "--connect-timeout", "2.5", "-t", "30",
        "--ssh", "ssh -F cfg", "--no-group", "--diff", "--json", "--outdir", "out", "--",
        "pip", "install", "x>=1"])
    assert options == AllrunOptions(
        command="pip install x>=1", hostfile="/etc/h", exclude="worker3", fanout=8, connect_timeout=2.5,
        timeout=30.0, ssh="ssh -F cfg", group=False, diff=True, json=True, outdir="out")


def test_defaults_and_the_command_without_separator():
    options = parse_allrun_argv(["uname", "-a"])
    assert options.command == "uname -a"
    assert (options.fanout, options.connect_timeout, options.timeout, options.group) == (64, 10.0, None, True)


@pytest.mark.parametrize("argv, field, value", [
    (["--fanout=3", "true"], "fanout", 3),
    (["-f3", "true"], "fanout", 3),
    (["-t0.5", "true"], "timeout", 0.5),
    (["--timeout=7", "true"], "timeout", 7.0),
    (["-H", "a,b", "true"], "hosts", "a,b"),
    (["--host", "a", "true"], "hosts", "a"),
    (["--machinefile", "f", "true"], "hostfile", "f"),
    (["--exclude=w[1-2]", "true"], "exclude", "w[1-2]"),
])
def test_option_spellings(argv, field, value):
    assert getattr(parse_allrun_argv(argv), field) == value


def test_options_after_the_command_belong_to_the_command():
    options = parse_allrun_argv(["-H", "a", "ls", "-x", "-t", "--json"])
    assert options.command == "ls -x -t --json" and options.exclude is None and not options.json


def test_copy_with_and_without_dest():
    assert parse_allrun_argv(["--copy", "w.whl", "--", "pip", "install", "w.whl"]).copy == ("w.whl", None)
    both = parse_allrun_argv(["--copy", "w.whl", "/tmp/", "--", "ls", "/tmp"])
    assert (both.copy, both.command) == (("w.whl", "/tmp/"), "ls /tmp")
    alone = parse_allrun_argv(["--copy", "w.whl", "--json"])
    assert (alone.copy, alone.json, alone.command) == (("w.whl", None), True, "")


def test_help():
    assert parse_allrun_argv(["--help"]).help


@pytest.mark.parametrize("argv, words", [
    ([], "no command"),
    (["--"], "no command"),
    (["-H", "a"], "no command"),
    (["-q", "true"], "'-q'"),
    (["--fanout", "0", "true"], "'0'"),
    (["-f", "x", "true"], "'x'"),
    (["-t", "-1", "true"], "'-1'"),
    (["-t", "nan", "true"], "'nan'"),
    (["--connect-timeout", "inf", "true"], "'inf'"),
    (["--timeout"], "needs a value"),
    (["--json=yes", "true"], "--json"),
    (["-H", "a", "--hostfile", "f", "true"], "not both"),
    (["--copy"], "needs a value"),
    (["--copy", "a", "b", "pip", "install"], "put -- before the command"),
    (["-o", "name", "true"], "'-o'"),
    (["--ssh=", "true"], "non-empty"),
])
def test_bad_command_lines_name_the_problem(argv, words):
    with pytest.raises(MlpMagicError) as error:
        parse_allrun_argv(argv)
    assert words in str(error.value)
    assert "\n" not in str(error.value)


# ------------------------------------------------------------------ the magics


def test_line_magic_keeps_the_command_exactly_as_written():
    line = '-H worker[0-1] -t 5 echo "a  b" | grep -c \'a\' > "$HOME/x"'
    options = parse_allrun_line(line, None, ENV, {})
    assert options.command == 'echo "a  b" | grep -c \'a\' > "$HOME/x"'   # $HOME left to the remote shell
    assert (options.hosts, options.timeout) == ("worker[0-1]", 5.0)


def test_line_magic_expands_variables_in_option_values_only():
    line = "-H $HOSTS_VAR -x ${EXCL} -o res -- echo $HOSTS_VAR"
    options = parse_allrun_line(line, None, ENV, {"EXCL": "worker1"})
    assert (options.hosts, options.exclude, options.out) == ("worker[0-1]", "worker1", "res")
    assert options.command == "echo $HOSTS_VAR"


def test_cell_magic_takes_the_cell_as_the_script():
    script = "set -e\npip install x\npython -c 'import x'\n"
    options = parse_allrun_line("--fanout 4 --diff", script, ENV, {})
    assert (options.command, options.fanout, options.diff) == (script, 4, True)


@pytest.mark.parametrize("line, cell, words", [
    ("", None, "no command"),
    ("-H $NOPE_NOT_SET true", None, "NOPE_NOT_SET"),
    ("-H 'unclosed true", None, "unclosed"),
    ("--json true", None, "'--json'"),
    ("-o 3x true", None, "'3x'"),
    ("echo hi", "ls\n", "options only"),
])
def test_bad_magic_lines(line, cell, words):
    with pytest.raises(MlpMagicError) as error:
        parse_allrun_line(line, cell, ENV, {})
    assert words in str(error.value)


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
    split = list(split_with_offsets(line))
    assert [w for w, _ in split] == shlex.split(line)
    for (_, offset), raw in zip(split, words):
        assert line[offset:offset + len(raw)] == raw


@settings(max_examples=300)
@given(st.lists(st.one_of(st.text(max_size=8), st.sampled_from(
    ["-H", "-x", "-f", "-t", "--copy", "--", "--json", "--ssh", "--outdir", "--fanout=", "-o", "--diff"])),
    max_size=8))
@example(["-f", "\u00b2"])   # '²'.isdigit() is True, int('²') raises ValueError
def test_only_our_error_escapes_the_command_parser(argv):
    try:
        parse_allrun_argv(argv)
    except MlpMagicError as error:
        assert str(error)


@settings(max_examples=300)
@given(st.text(max_size=40), st.one_of(st.none(), st.text(max_size=10)))
def test_only_our_error_escapes_the_magic_parser(line, cell):
    try:
        parse_allrun_line(line, cell, ENV, {})
    except MlpMagicError as error:
        assert str(error)


# ------------------------------------------------------------------ hosts and the ssh command


@pytest.mark.parametrize("name", ["worker0", "gpu-01.cluster", "10.0.0.7", "fe80::1", "node_3"])
def test_good_host_names(name):
    assert as_target(name).name == name


@pytest.mark.parametrize("name", ["a;b", "$(reboot)", "a b", "`id`", "-oProxyCommand=x", "", "a|b", "x'y"])
def test_host_names_with_shell_syntax_are_refused(name):
    with pytest.raises(MlpMagicError) as error:
        as_targets([name])
    assert repr(name) in str(error.value)


def test_user_at_host_and_duplicates():
    target = as_target("root@worker1")
    assert (target.user, target.name) == ("root", "worker1")
    with pytest.raises(MlpMagicError, match="bad;user"):
        as_target("bad;user@worker1")
    with pytest.raises(MlpMagicError, match="listed twice"):
        as_targets(["a", "a"])
    with pytest.raises(MlpMagicError, match="empty"):
        as_targets([])


def test_ssh_command_strings():
    assert ssh_command("ssh -F '/tmp/my cfg'") == ["ssh", "-F", "/tmp/my cfg"]
    assert ssh_command(("ssh", "-F", "c")) == ["ssh", "-F", "c"]
    with pytest.raises(MlpMagicError):
        ssh_command("ssh -F 'unclosed")
    with pytest.raises(MlpMagicError):
        ssh_command("")


# ------------------------------------------------------------------ exit status


def host(name, status="ok", code=0):
    return HostResult(name, status, code)


@pytest.mark.parametrize("results, expected", [
    ([host("a"), host("b")], 0),
    ([host("a"), host("b", "failed", 3)], 3),
    ([host("a", "failed", 1), host("b", "failed", 7)], 7),
    ([host("a", "failed", 3), host("b", "unreachable", 255)], 255),
    ([host("a"), host("b", "timeout", None)], 255),
    ([host("a", "failed", 3), host("b", "interrupted", None)], 130),
])
def test_exit_status(results, expected):
    assert exit_status(results) == expected


def test_footer_names_the_hosts_that_did_not_finish():
    results = [host("worker0"), host("worker1", "interrupted", None), host("worker2", "interrupted", None)]
    text = footer(results)
    assert "3 hosts" in text and "1 ok" in text and "2 interrupted" in text
    assert "not finished: worker[1-2]" in text
