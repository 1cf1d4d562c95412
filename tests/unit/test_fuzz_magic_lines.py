"""Fuzz the magics' argument lines (%%mpirun, %mlp_cluster, mlp-magic stacks) and the stacks
scanner's answers: only MlpMagicError ever escapes, alone, naming the offending value."""
from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from mlp_magic.core.line_args import expand_vars
from mlp_magic.mpirun.args import MpirunArgs, check_form, parse_mpirun_args

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
    "'a b'",
    "$NP", "${NP}", "$NOPE", "${", "${}", "$$", "$bad", "$n", "${1x}", "\u00b2", "9" * 40,
]) | JUNK


GOOD_OPTIONS = st.sampled_from([
    "-np 4", "-n $NP", "-np=${NP}", "-H $HOSTS", "--hostfile /etc/mlp/hostfile", "--oversubscribe",
    "--ranks 0,2-3", "--targets all", "--timeout 60", "--timeout=0.5", "--no-group", "--diff",
    "--all-outputs", "-o res", "--out r2", "--log-dir '/tmp/a b'", "--restart", "--status", "--stop",
    "--post-mortem", "--frame 1", "--frame=0", "--where", "train.py --lr 0.5", "t.py --timeout 3 -np 2",
    "--pull w", "--push w", "--compare m.state_dict()['w']",
])


@st.composite
def argument_lines(draw):
    words = []
    for _ in range(draw(st.integers(0, 6))):
        words.append(draw(OPTIONS))
        if draw(st.booleans()):
            words.append(draw(ARG_VALUES))
    return " ".join(words)


class Unprintable:
    def __str__(self):
        raise ValueError("cannot print me")


ENV = {"NP": "4", "HOSTS": "worker0:8", "QUOTE": "'"}
USER_NS = {"n": 2, "bad": Unprintable(), "NP": "shadowed"}


@FUZZ
@given(line=st.lists(GOOD_OPTIONS, max_size=5).map(" ".join) | argument_lines() | st.text(max_size=60))
@example(line="'\n0'")   # a quoted newline in a stray argument: still a one-line message
def test_parse_mpirun_args(line):
    args, message = only_our_error(parse_mpirun_args, line, ENV, USER_NS)
    if message is not None:
        assert mentions(message, line), (message, line)
        return
    assert isinstance(args, MpirunArgs)
    assert args.np is None or args.np >= 1
    assert args.timeout is None or 0 < args.timeout < float("inf")
    assert args.out is None or args.out.isidentifier()
    assert sum([args.status, args.stop, args.restart, args.stacks]) <= 1
    forms = [args.script, args.post_mortem, args.where, args.status, args.stop, args.stacks]
    assert sum(map(bool, forms)) <= 1
    assert args.frame is None or (args.frame >= 0 and args.post_mortem)
    assert args.script or not args.script_args
    for cell in (True, False):   # each form accepts the line or refuses it with one line
        only_our_error(check_form, args, cell)
    moving = [args.compare is not None, args.pull is not None, args.push is not None]
    assert sum(moving) <= 1
    assert not (any(moving) and (args.status or args.stop or args.restart or args.stacks))
    assert args.compare is None or args.compare.strip()


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
                                   "--refresh", "--refresh x", "--topo-file nohost", "--bogus", "-H"])


@FUZZ
@given(line=st.lists(CLUSTER_OPTIONS, max_size=4).map(" ".join) | st.text(max_size=50))
@example(line=",\r0")   # the message names ',' (a token of its own)
def test_parse_cluster_args(line):
    from mlp_magic.cluster.args import parse_cluster_args

    found, message = only_our_error(parse_cluster_args, line)
    if message is not None:
        assert mentions(message, line), (message, line)
    else:
        assert isinstance(found, dict)
        assert found.get("auto_refresh") is None or found["auto_refresh"] > 0


# ---------------------------------------------------------------- mlp-magic stacks / %mlp_stacks

STACKS_OPTIONS = st.sampled_from(["--hostfile /tmp/h", "-H worker[0-3]", "--pid 1,2", "--pid 0",
                                  "--pid x,1",
                                  "--match 'train.py'", "--match '('", "--match ''", "--native", "--threads",
                                  "--timeout 2", "--timeout -1", "--ssh 'ssh -F c'", "--json", "--bogus",
                                  "-H",
                                  "$NP", "$nope", "--pid $n"])


@FUZZ
@given(line=st.lists(STACKS_OPTIONS, max_size=4).map(" ".join) | st.text(max_size=50))
def test_parse_stacks_line(line):
    from mlp_magic.stacks.options import StacksOptions, parse_stacks_line

    found, message = only_our_error(parse_stacks_line, line, ENV, USER_NS)
    if message is not None:
        assert mentions(message, line) or "expected one argument" in message, (message, line)
        return
    assert isinstance(found, StacksOptions) and found.timeout > 0
    assert found.pids is None or (found.pids and all(p > 0 for p in found.pids))
    assert not (found.pids and found.match) and not (found.hosts and found.hostfile)


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
