"""Fuzz the magics' lines (%mpirun and %%mpirun, %mlp_cluster, %mlp_stacks, %mlp_doctor, %allrun) and
the stacks scanner's answers: only MlpMagicError ever escapes, alone, naming the offending value, and
what parses is sound for the verb it names."""
from __future__ import annotations

import math
import re

from hypothesis import example, given
from hypothesis import strategies as st

from mlp_magic.commands.pure.parse import allrun_in_line, choose_in_line
from mlp_magic.commands.pure.table import MPIRUN
from mlp_magic.core.options import expand_vars

from tests.unit.fuzz_checks import FUZZ, JUNK, mentions, only_our_error

# ---------------------------------------------------------------- magic argument lines

OPTIONS = st.sampled_from([
    "-np", "-n", "--hostfile", "--machinefile", "-H", "--host", "--oversubscribe", "--ranks", "--targets",
    "--timeout", "--no-group", "--diff", "--all-outputs", "-o", "--out", "--log-dir", "--restart", "--status",
    "--stop", "--nope", "-x", "--", "-np=", "--timeout=", "--post-mortem", "--frame", "--frame=", "--where",
    "--stacks", "train.py", "-", "t.py", "--compare", "--pull", "--push",
])
ARG_VALUES = st.sampled_from([
    "4", "0", "-1", "x", "1abc", "class", "res", "0,2-3", "all", "60", "1e400", "nan", "-0.5", "'", '"',
    "'a b'", "''",
    "$NP", "${NP}", "$NOPE", "${", "${}", "$$", "$bad", "$n", "${1x}", "\u00b2", "9" * 40,
]) | JUNK


GOOD_OPTIONS = st.sampled_from([
    "-np 4", "-n $NP", "-np=${NP}", "-H $HOSTS", "--hostfile /etc/mlp/hostfile", "--oversubscribe",
    "--ranks 0,2-3", "--targets all", "--timeout 60", "--timeout=0.5", "--no-group", "--diff",
    "--all-outputs", "-o res", "--out r2", "--log-dir '/tmp/a b'", "--restart", "--status", "--stop",
    "--post-mortem", "--frame 1", "--frame=0", "--where", "train.py --lr 0.5", "t.py --timeout 3 -np 2",
    "--pull w", "--push w", "--compare m.state_dict()['w']", "--stacks",
])


@st.composite
def argument_lines(draw, options=OPTIONS):
    words = []
    for _ in range(draw(st.integers(0, 6))):
        words.append(draw(options))
        if draw(st.booleans()):
            words.append(draw(ARG_VALUES))
    return " ".join(words)


class Unprintable:
    def __str__(self):
        raise ValueError("cannot print me")


ENV = {"NP": "4", "HOSTS": "worker0:8", "QUOTE": "'"}
USER_NS = {"n": 2, "bad": Unprintable(), "NP": "shadowed"}
FORMS = st.sampled_from([None, "print(1)\n"])     # %mpirun, %%mpirun


def refused_naming(message: str, line: str, *progs: str) -> None:
    """One line from the magic naming something the user wrote (``-n4``: the option, ``-n``)."""
    short = [word[:2] for word in line.split() if re.match(r"-[^-].", word)]
    assert mentions(message, line, *short), (message, line)
    assert message.startswith(progs), (message, progs)


def check_mpirun_choice(choice, cell) -> None:
    """What a parsed %mpirun line gives its verb is sound."""
    verb, options = choice.verb, choice.options
    assert verb in MPIRUN and verb.form in ("both", "cell" if cell is not None else "line")
    own = {option.dest for option in (*verb.options, *verb.magic_options)}
    assert all(dest in own or dest == f"verb:{verb.name}" for dest in options.given), options.given
    assert getattr(options, "np", None) is None or options.np >= 1
    timeout = getattr(options, "timeout", None)
    assert timeout is None or (0 < timeout and math.isfinite(timeout))
    assert getattr(options, "out", None) is None or options.out.isidentifier()
    assert getattr(options, "ranks", None) is None or options.ranks.strip()
    assert (options.script is not None) == (verb.name == "script")
    assert options.script is not None or not options.script_args
    assert hasattr(options, "frame") == (verb.name == "post-mortem")
    assert getattr(options, "frame", None) is None or options.frame >= 0
    assert (options.expression is not None) == (verb.name == "compare")
    assert options.expression is None or options.expression.strip()
    assert (options.name is not None) == (verb.name in ("pull", "push"))
    assert options.name is None or options.name.isidentifier()
    assert not (getattr(options, "hostfile", None) and getattr(options, "hosts", None))


@FUZZ
@given(line=st.lists(GOOD_OPTIONS, max_size=5).map(" ".join) | argument_lines() | st.text(max_size=60),
       cell=FORMS)
@example(line="'\n0'", cell=None)   # a quoted newline in a stray argument: still a one-line message
@example(line="--ranks ''", cell="x")
@example(line="--no-group $$", cell="x")   # "'$' looks like a script": the message shows what $$ became
def test_mpirun_line(line, cell):
    choice, message = only_our_error(choose_in_line, "mpirun", line, cell, ENV, USER_NS)
    if message is not None:
        refused_naming(message, line, "%mpirun: ", "%%mpirun: ")
    else:
        check_mpirun_choice(choice, cell)


@FUZZ
@given(line=st.text(st.sampled_from("${}$ NPnbad_1x'\"-"), max_size=20) | st.text(max_size=60))
def test_expand_vars(line):
    text, message = only_our_error(expand_vars, line, ENV, USER_NS)
    if message is not None:
        assert mentions(message, line), (message, line)
    else:
        assert isinstance(text, str)


# ---------------------------------------------------------------- %mlp_cluster's line

CLUSTER_OPTIONS = st.sampled_from(["--hostfile /tmp/h", "-H a:2,b:2", "--refresh 5", "--refresh=0.5",
                                   "--timeout 3", "--no-probe", "--topo-file a=/tmp/t.txt",
                                   "--topo-file b=$HOSTS", "--refresh", "--refresh x", "--topo-file nohost",
                                   "--bogus", "-H", "-H $NOPE"])


@FUZZ
@given(line=st.lists(CLUSTER_OPTIONS, max_size=4).map(" ".join) | st.text(max_size=50))
@example(line=",\r0")   # the message names ',' (a word of its own)
@example(line="$$")      # '$' is what the line became: the message says so
def test_cluster_line(line):
    choice, message = only_our_error(choose_in_line, "mlp_cluster", line, None, ENV, USER_NS)
    if message is not None:
        refused_naming(message, line, "%mlp_cluster: ")
        return
    options = choice.options
    assert choice.verb.name == "cluster" and options.timeout > 0
    assert options.auto_refresh is None or 0 < options.auto_refresh < math.inf
    assert options.gpus is None or all(host.strip() and path.strip() for host, path in options.gpus)
    assert not (options.hosts and options.hostfile)


# ---------------------------------------------------------------- %mlp_stacks

STACKS_OPTIONS = st.sampled_from(["--hostfile /tmp/h", "-H worker[0-3]", "--pid 1,2", "--pid 0",
                                  "--pid x,1",
                                  "--match 'train.py'", "--match '('", "--match ''", "--native", "--threads",
                                  "--timeout 2", "--timeout -1", "--ssh 'ssh -F c'", "--json", "--bogus",
                                  "-H",
                                  "$NP", "$nope", "--pid $n"])


@FUZZ
@given(line=st.lists(STACKS_OPTIONS, max_size=4).map(" ".join) | st.text(max_size=50))
@example(line="$NP")     # "unexpected argument '4'" is a riddle unless it says what $NP became
def test_stacks_line(line):
    choice, message = only_our_error(choose_in_line, "mlp_stacks", line, None, ENV, USER_NS)
    if message is not None:
        refused_naming(message, line, "%mlp_stacks: ")
        return
    found = choice.options
    assert choice.verb.name == "stacks" and 0 < found.timeout <= 86400
    assert found.pids is None or (found.pids and all(p > 0 for p in found.pids))
    assert not (found.pids and found.match) and not (found.hosts and found.hostfile)


# ---------------------------------------------------------------- %mlp_doctor

DOCTOR_OPTIONS = st.sampled_from(["-H w[0-1]", "--package pip", "--package 'a b'", "--timeout 5",
                                  "--timeout 4000", "--links", "--np 4", "--np 1", "--np \u00b2",
                                  "--fraction 0.3", "--fraction 0", "--size 64", "--size nan",
                                  "--links-backend mpi", "--links-backend nccl", "--no-import", "--json",
                                  "--python $NOPE", "--np", "--np=$n"])


@FUZZ
@given(line=st.lists(DOCTOR_OPTIONS, max_size=4).map(" ".join) | st.text(max_size=50))
@example(line="--np \u00b2")    # '²'.isdigit() is True, int('²') raises ValueError
def test_doctor_line(line):
    choice, message = only_our_error(choose_in_line, "mlp_doctor", line, None, ENV, USER_NS)
    if message is not None:
        refused_naming(message, line, "%mlp_doctor: ")
        return
    found = choice.options
    assert choice.verb.name == "doctor" and 0 < found.timeout <= 3600
    assert 0 < found.fraction <= 1 and 0 < found.size_mb <= 4096
    assert found.np is None or 2 <= found.np <= 4096
    assert found.links_backend in ("auto", "torch", "mpi") and all(name.strip() for name in found.packages)


# ---------------------------------------------------------------- %allrun and %%allrun

ALLRUN_OPTIONS = st.sampled_from(["-H", "-x", "-f", "-t", "--copy", "--", "--json", "--ssh", "--outdir",
                                  "--fanout=", "-o", "--diff", "--no-group", "--connect-timeout", "echo",
                                  "'", "$HOSTS"])


@FUZZ
@given(line=argument_lines(ALLRUN_OPTIONS) | st.text(max_size=50), cell=st.none() | st.text(max_size=10))
@example(line="-H $NOPE true", cell=None)
def test_allrun_line(line, cell):
    found, message = only_our_error(allrun_in_line, line, cell, ENV, USER_NS)
    if message is not None and "no command given" in message:
        assert cell is None or not cell.strip(), message   # options only, and nothing to run
    elif message is not None:
        refused_naming(message, line or "", "%%allrun: " if cell is not None else "%allrun: ")
    if message is not None:
        return
    assert found.command == cell if cell is not None else found.command == found.command.strip()
    assert found.command.strip() or found.copy is not None
    assert found.fanout >= 1 and 0 < found.connect_timeout < math.inf
    assert found.timeout is None or 0 < found.timeout < math.inf
    assert found.out is None or found.out.isidentifier()
    assert not (found.hosts and found.hostfile)


# ---------------------------------------------------------------- the stacks scanner's answers

@FUZZ
@given(text=st.text(max_size=200) | st.lists(st.sampled_from([
    '{"scan": {"host": "w", "pid": 1}}', '{"pid": 3, "rank": 0, "job": "j", "threads": []}',
    '{"pid": "x"}',
    '{"pid": 4, "threads": [{"name": "t", "main": true, "idle": false, "frames": [["f", 1]]}]}',
    '[]', 'null', '{"scan": 3}', ''])).map("\n".join))
def test_parse_scan_never_raises(text):
    """A host's answer is ours to read, whatever it printed: its HostScan, or the host's error."""
    from mlp_magic.stacks.pure.jobs import parse_scan

    scan = parse_scan("w", text)
    assert scan.error is None or (scan.error and "\n" not in scan.error)
