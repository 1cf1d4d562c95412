"""The other magics' lines and the ``mlp-magic`` command: ``%mlp_stacks`` / ``mlp-magic stacks`` (one
table, the same options, the same errors), ``%mlp_doctor``, ``%mlp_cluster`` (and its verb), and
``mlp-magic``'s argv, exit status and one-line stderr."""
from __future__ import annotations

import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.cli import main, parse_command
from mlp_magic.commands.pure.parse import choose_in_line
from mlp_magic.commands.pure.table import CLUSTER, COMMANDS, DOCTOR, STACKS, options_for
from tests.unit.parser_errors import error_of

H200 = Path(__file__).resolve().parents[3] / "fixtures" / "topo" / "hgx-h200-8gpu-12nic.txt"


def own(verb, options) -> dict:
    """The values of the verb's own options (not the magic's extras, not the command's --help)."""
    return {option.dest: getattr(options, option.dest) for option in verb.options}


def magic(name, line, env=None, user_ns=None):
    return choose_in_line(name, line, None, {} if env is None else env, user_ns)


# ---------------------------------------------------------------- %mlp_stacks and mlp-magic stacks

@pytest.mark.parametrize("line, expected", [
    ("", {}),
    ("-H worker[0-3]", {"hosts": "worker[0-3]"}),
    ("--hosts w1", {"hosts": "w1"}),
    ("--hostfile /tmp/h --native --threads", {"hostfile": "/tmp/h", "native": True, "threads": True}),
    ("--pid 12,7,12", {"pids": [7, 12]}),
    ("--pid=' 3, 4'", {"pids": [3, 4]}),
    ("--match 'train\\.py --lr'", {"match": "train\\.py --lr"}),
    ("--timeout 2.5 --ssh 'ssh -F cfg' --json", {"timeout": 2.5, "ssh": "ssh -F cfg", "json": True}),
    ("--timeout 86400", {"timeout": 86400.0}),
])
def test_the_command_and_the_magic_agree(line, expected):
    want = own(STACKS, options_for(STACKS, **expected))
    choice = magic("mlp_stacks", line)
    assert choice.verb is STACKS and own(STACKS, choice.options) == want
    verb, options = parse_command(["stacks", *shlex.split(line)])
    assert verb is STACKS and own(STACKS, options) == want and options.help is False


def test_the_magic_expands_names():
    choice = magic("mlp_stacks", "-H $HOSTS --pid $pid", {"HOSTS": "w[0-1]"}, {"pid": 42})
    assert own(STACKS, choice.options) == own(STACKS, options_for(STACKS, hosts="w[0-1]", pids=[42]))


@pytest.mark.parametrize("line, says", [
    ("--pid 0", "--pid: expected process ids such as 1234,1240, got '0'"),
    ("--pid 1,x", "'x' is not one"), ("--pid ''", "--pid"), ("--pid -3", "--pid"),
    ("--pid 99999999999", "'99999999999' is not one"),
    ("--pid " + ",".join(["1"] * 5000), "--pid: at most 4096 process ids, got 5000"),
    ("--match '('", "--match: not a regular expression: '('"), ("--match ''", "empty pattern"),
    ("--timeout 0", "--timeout"), ("--timeout nan", "--timeout"), ("--timeout inf", "--timeout"),
    ("--timeout 1e9", "up to 86400"),     # poll's and the threads' own limits are far below inf
    ("--pid 1 --match x", "give either --pid or --match, not both"),
    ("--hostfile a -H b", "give either --hostfile or -H, not both"),
    ("--bogus", "unknown option '--bogus'"), ("--help", "unknown option '--help'"),
    ("-H", "-H needs a value"), ("'unclosed", "cannot split"), ("worker0", "unexpected argument 'worker0'"),
    ("-H $NOPE", "unknown variable $NOPE"),
])
def test_bad_input_is_one_line_naming_it(line, says):
    message = error_of(magic, "mlp_stacks", line)
    assert says in message and "\n" not in message and message.startswith("%mlp_stacks: ")


def test_an_error_shows_what_the_names_became():
    """"unexpected argument '4'" is a riddle when the line said $NP: the message says what it became."""
    message = error_of(magic, "mlp_stacks", "-H w1 $NP", {"NP": "4"})
    assert message == "%mlp_stacks: unexpected argument '4' (the line '-H w1 $NP' expanded to '-H w1 4')"
    message = error_of(magic, "mlp_stacks", "--pid $P", {"P": "0"})
    assert message.endswith("(the line '--pid $P' expanded to '--pid 0')")


def test_the_command_refuses_the_same_way():
    message = error_of(parse_command, ["stacks", "--pid", "1,x"])
    assert message == ("mlp-magic stacks: --pid: expected process ids such as 1234,1240, got '1,x' "
                       "('x' is not one) (see mlp-magic stacks --help)")


# ---------------------------------------------------------------- %mlp_doctor

def test_the_doctor_line():
    options = magic("mlp_doctor", "-H worker[0-1] --package pip --package pip --links --np 4 --json").options
    # each package is asked once by the command (doctor/command.gather); the parser keeps the line's order
    assert (options.hosts, options.packages, options.links, options.np, options.json) == (
        "worker[0-1]", ("pip", "pip"), True, 4, True)
    assert own(DOCTOR, magic("mlp_doctor", "").options) == own(DOCTOR, options_for(DOCTOR))
    assert magic("mlp_doctor", "--links").options.links_backend == "auto"
    assert magic("mlp_doctor", "--links --links-backend mpi").options.links_backend == "mpi"
    assert magic("mlp_doctor", "--fraction 1 --size 4096 --timeout 3600").options.fraction == 1.0
    assert magic("mlp_doctor", "--python /usr/bin/python3 --no-import").options.no_import


@pytest.mark.parametrize("line, message", [
    ("--fraction 0", "%mlp_doctor: --fraction: expected a fraction in (0, 1], got '0'"),
    ("--fraction nan", "--fraction: expected a fraction in (0, 1], got 'nan'"),
    ("--links-backend nccl", "%mlp_doctor: --links-backend: expected one of auto, torch, mpi, got 'nccl'"),
    ("--np 1", "--np: expected a number of ranks from 2 to 4096, got '1'"),
    ("--np 4097", "got '4097'"),
    ("--np \u00b2", "got '\u00b2'"),
    ("--timeout 3601", "--timeout: expected seconds in (0, 3600], got '3601'"),
    ("--size 0", "--size: expected megabytes in (0, 4096], got '0'"),
    ("--package 'a b'", "--package: not a package name: 'a b'"),
    ("--package", "--package needs a value"),
    ("--python ''", "--python: expected a non-empty value, got ''"),
    ("--help", "unknown option '--help'"),
    ("-n 4", "unknown option '-n'"),
])
def test_bad_doctor_lines(line, message):
    found = error_of(magic, "mlp_doctor", line)
    assert message in found and found.startswith("%mlp_doctor: ")


@given(st.text(max_size=60))
def test_any_doctor_line_parses_or_is_one_clear_error(line):
    try:
        magic("mlp_doctor", line, {"HOME": "/root"})
    except Exception as error:
        assert type(error).__name__ == "MlpMagicError"
        assert str(error).startswith("%mlp_doctor") and "\n" not in str(error)


# ---------------------------------------------------------------- %mlp_cluster

def test_cluster_defaults_and_every_option():
    defaults = {"hostfile": None, "hosts": None, "auto_refresh": None, "timeout": 5.0, "probe": True,
                "gpus": None, "static": False}
    assert own(CLUSTER, magic("mlp_cluster", "").options) == defaults
    choice = magic("mlp_cluster", "-H gpu[0-1]:8 --refresh 2.5 --timeout=3 --no-probe "
                                  "--topo-file gpu0=topo/a.txt --topo-file='gpu1=my topo.txt'")
    assert choice.verb is CLUSTER and own(CLUSTER, choice.options) == {
        "hostfile": None, "hosts": "gpu[0-1]:8", "auto_refresh": 2.5, "timeout": 3.0, "probe": False,
        "gpus": (("gpu0", "topo/a.txt"), ("gpu1", "my topo.txt")), "static": False}
    assert magic("mlp_cluster", "--hostfile ~/hosts").options.hostfile == "~/hosts"
    assert magic("mlp_cluster", "--topo-file ' a = b '").options.gpus == (("a", "b"),)


@pytest.mark.parametrize("line, message", [
    ("--refresh soon", "--refresh: expected a positive number of seconds, got 'soon'"),
    ("--refresh 0", "--refresh: expected a positive number of seconds, got '0'"),
    ("--timeout=-1", "--timeout: expected a positive number of seconds, got '-1'"),
    ("--refresh nan", "--refresh: expected a positive number of seconds, got 'nan'"),
    ("--topo-file gpu0", "--topo-file: expected HOST=FILE (a saved `nvidia-smi topo -m`), got 'gpu0'"),
    ("--topo-file =a.txt", "--topo-file: expected HOST=FILE"),
    ("--topo-file 'a= '", "--topo-file: expected HOST=FILE"),
    ("-H", "-H needs a value"),
    ("-H ''", "-H: expected a non-empty value, got ''"),
    ("--hostfile f -H a:1", "give either --hostfile or -H, not both"),
    ("--no-probe=yes", "--no-probe takes no value (got --no-probe=yes)"),
    ("--bogus", "unknown option '--bogus'"),
    ("worker0", "unexpected argument 'worker0'"),
    ("-H 'unclosed", "cannot split \"-H 'unclosed\": unclosed '"),
])
def test_cluster_line_errors(line, message):
    assert error_of(magic, "mlp_cluster", line).startswith("%mlp_cluster: " + message)


@pytest.mark.parametrize("line, option", [
    ("-H a:1 -H b:1", "-H"),
    ("--hostfile a --hostfile b", "--hostfile"),
    ("--refresh 1 --refresh 2", "--refresh"),
])
def test_an_option_given_twice_is_refused(line, option):
    """The old %mlp_cluster parser refused this ("-H given twice"): one of the two would be dropped."""
    message = error_of(magic, "mlp_cluster", line)
    assert message.startswith("%mlp_cluster: ") and option in message


def cluster_verb_keywords(monkeypatch, line: str) -> dict:
    from mlp_magic.cluster import widget

    seen = {}
    monkeypatch.setattr(widget, "cluster_view", lambda **keywords: seen.update(keywords) or "view")
    context = SimpleNamespace(owner=SimpleNamespace(world=None))
    assert widget.cluster_verb(context, magic("mlp_cluster", line).options) == "view"
    assert seen.pop("world_of")() is None   # the live thread follows the owner's World
    return seen


def test_the_cluster_verb_gives_cluster_view_its_keywords(monkeypatch):
    assert cluster_verb_keywords(monkeypatch, "") == {
        "hostfile": None, "hosts": None, "auto_refresh": 5.0, "timeout": 5.0, "probe": True,
        "gpus": None, "world": None}   # live by default
    assert cluster_verb_keywords(monkeypatch, "--static")["auto_refresh"] is None
    keywords = cluster_verb_keywords(monkeypatch, "-H g:2 --refresh 3 --no-probe --topo-file g=a.txt "
                                                  "--topo-file h=b.txt")
    assert keywords == {"hostfile": None, "hosts": "g:2", "auto_refresh": 3.0, "timeout": 5.0, "probe": False,
                        "gpus": {"g": "a.txt", "h": "b.txt"}, "world": None}


def test_the_cluster_verb_refuses_a_host_given_twice(monkeypatch):
    message = error_of(cluster_verb_keywords, monkeypatch, "--topo-file a=1 --topo-file a=2")
    assert message == "%mlp_cluster: --topo-file gives host 'a' twice"


def test_the_cluster_line_feeds_cluster_view(monkeypatch, tmp_path):
    from mlp_magic.cluster import widget

    saved = tmp_path / "h200.txt"
    saved.write_text(H200.read_text())
    keywords = cluster_verb_keywords(monkeypatch, "-H hgx0:8,hgx1:8 --topo-file hgx0=%s --no-probe" % saved)
    monkeypatch.undo()   # the real cluster_view, with no World of this process
    monkeypatch.setattr(widget, "kernel_world", lambda: None)
    view = widget.cluster_view(check_reachable=False, state_dir=str(tmp_path), **keywords)
    hgx0, hgx1 = view.state.hosts
    assert hgx0.gpus.links["GPU0"]["GPU7"] == "NV18" and hgx1.gpus is None
    view.close()


# ---------------------------------------------------------------- mlp-magic

@pytest.mark.parametrize("argv, values", [
    (["topo"], {}),
    (["topo", "--from-file", "-", "--host", "w7", "--json", "--timeout", "3", "--ssh", "false"],
     {"from_file": "-", "host": "w7", "json": True, "timeout": 3.0, "ssh": "false"}),
    (["status", "-H", "a:2", "--json", "--timeout=3", "--no-probe"],
     {"hosts": "a:2", "json": True, "timeout": 3.0, "probe": False}),
    (["status", "--machinefile", "hf"], {"hostfile": "hf"}),
    (["top", "--once", "--interval", "0.5"], {"once": True, "interval": 0.5}),
    (["doctor", "--links", "--np", "4", "--package", "a", "--package", "b"],
     {"links": True, "np": 4, "packages": ("a", "b")}),
    (["stacks", "--native"], {"native": True}),
])
def test_each_command_and_its_options(argv, values):
    verb, options = parse_command(argv)
    assert verb.command == argv[0] and verb in COMMANDS
    assert own(verb, options) == own(verb, options_for(verb, **values)) and options.help is False
    assert parse_command([argv[0], "--help"])[1].help and parse_command([argv[0], "-h"])[1].help


@pytest.mark.parametrize("argv, message", [
    ([], "give a command: topo, status, stacks, top, doctor, worlds, stop, dashboard (see mlp-magic --help)"),
    (["nope"], "unknown command 'nope': one of topo, status, stacks, top, doctor, worlds, stop, dashboard "
               "(see mlp-magic --help)"),
    (["--json"], "unknown command '--json'"),
    (["topo", "--bogus"], "mlp-magic topo: unknown option '--bogus' (see mlp-magic topo --help)"),
    (["topo", "x"], "mlp-magic topo: unexpected argument 'x' (see mlp-magic topo --help)"),
    (["topo", "--host"], "mlp-magic topo: --host needs a value (see mlp-magic topo --help)"),
    (["topo", "--timeout", "soon"], "mlp-magic topo: --timeout: expected a positive number of seconds, "
                                    "got 'soon' (see mlp-magic topo --help)"),
    (["status", "-H", "a", "--hostfile", "b"], "mlp-magic status: give either -H or --hostfile, not both"),
    (["top", "--interval", "0"], "mlp-magic top: --interval: expected a positive number of seconds, got '0'"),
    (["doctor", "--np", "1"], "mlp-magic doctor: --np: expected a number of ranks from 2 to 4096, got '1'"),
    (["stacks", "--pid", "1", "--match", "x"], "mlp-magic stacks: give either --pid or --match, not both"),
])
def test_bad_argv_is_one_error(argv, message):
    assert error_of(parse_command, argv).startswith(message)


def test_help_asks_for_the_overview():
    assert parse_command(["--help"]) == (None, None) == parse_command(["-h"])


def test_main_exits_0_with_help(capsys):
    assert main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: mlp-magic {topo,status,stacks,top,doctor,worlds,stop,dashboard}")
    assert err == ""
    assert all(f"  {verb.command}" in out for verb in COMMANDS)
    assert main(["stacks", "--help"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: mlp-magic stacks [--hostfile FILE] [-H HOSTS] [--pid PID[,PID...]]")
    assert "  -h, --help" in out and err == ""


@pytest.mark.parametrize("argv, stderr", [
    ([], "mlp-magic: give a command: topo, status, stacks, top, doctor, worlds, stop, dashboard "
         "(see mlp-magic --help)\n"),
    (["nope"], "mlp-magic: unknown command 'nope': one of topo, status, stacks, top, doctor, worlds, "
               "stop, dashboard (see mlp-magic --help)\n"),
    (["stacks", "--bogus"], "mlp-magic stacks: unknown option '--bogus' (see mlp-magic stacks --help)\n"),
    (["doctor", "--fraction", "2"], "mlp-magic doctor: --fraction: expected a fraction in (0, 1], got '2' "
                                    "(see mlp-magic doctor --help)\n"),
    (["doctor", "--np", "\u00b2"], "mlp-magic doctor: --np: expected a number of ranks from 2 to 4096, "
                                   "got '\u00b2' (see mlp-magic doctor --help)\n"),
])
def test_main_exits_2_with_one_line(capsys, argv, stderr):
    assert main(argv) == 2
    assert capsys.readouterr() == ("", stderr)
