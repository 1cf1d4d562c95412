"""Fuzz every parser of user input (hypothesis): only MlpMagicError ever escapes, it comes alone
(no chained exception), and its message names the offending value or a recognisable part of it.
When a parse succeeds, what it returns is sound (valid host names, positive slots, ...)."""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from mlp_magic.core.hostfile import check_host_name, parse_host_list, parse_hostfile, split_outside_brackets
from mlp_magic.core.line_args import expand_vars
from mlp_magic.core.ranges import expand_hosts, parse_ranks
from mlp_magic.core.topology import Topology, topology_from_environment
from mlp_magic.errors import MlpMagicError
from mlp_magic.world.args import MpirunArgs, check_form, parse_mpirun_args

# 200 examples keep the suite fast; MLP_FUZZ_EXAMPLES=5000 for a deeper run by hand.
FUZZ = settings(max_examples=int(os.environ.get("MLP_FUZZ_EXAMPLES", "200")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- checking messages

def _plain(text: str) -> str:
    """Quotes and backslashes removed, case folded: a value shown with repr() or as-is compares equal."""
    return re.sub(r"[\\'\"]", "", text).casefold()


def mentions(message: str, *texts: str) -> bool:
    """Does the message name some piece of one of the texts (its first characters, raw or repr'd)?"""
    shown = _plain(message)
    for text in texts:
        pieces = (re.split(r"[\s=:@,#\[\]$'\"]+", text) + re.split(r"[\s,]+", text) + text.split()
                  + [text.strip(), text])
        if not text.strip() and re.search(r"empty|no hosts|names no", message):
            return True   # a blank value can only be named as such
        for piece in filter(None, pieces):
            head = piece[:10]
            if _plain(head) in shown or _plain(repr(head)[1:-1]) in shown:
                return True
    return False


def only_our_error(function, *args, **kwargs):
    """Call; return (result, None) or (None, message) for an MlpMagicError; anything else fails."""
    try:
        result = function(*args, **kwargs)
        event("parsed")   # --hypothesis-show-statistics: the mix of good and bad inputs
        return result, None
    except MlpMagicError as error:
        event("refused")
        assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__), \
            f"chained: {error!r} from {error.__context__!r}"
        message = str(error)
        assert message and "\n" not in message.strip(), f"not one line: {message!r}"
        return None, message


# ---------------------------------------------------------------- strategies

NAMES = st.sampled_from([
    "worker0", "worker1", "Worker0", "gpu01", "10.0.0.7", "172.22.128.95", "fe80::1", "::1", "w[0-3]",
    "gpu[01-02,07]", "w[3-1]", "w[0-", "a]b", "a;b", "$(id)", "`id`", "-oProxyCommand=x", "", ".", "a b",
    "x" * 260, "caf\u00e9", "n[00-99]",
])
VALUES = st.sampled_from(["0", "1", "2", "8", "-1", "x", "\u00b2", "\u0663", "2.5", "", "9" * 30, "65536",
                          "1048577", " 4"]) | st.integers(0, 10 ** 7).map(str)
KEYS = st.sampled_from(["slots", "max_slots", "max-slots", "count", "cpu", "port", "username", "slot",
                        "bogus"])
JUNK = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
USERS = st.sampled_from(["root", "alice", "", "1x", "a;b"])


@st.composite
def hostfile_lines(draw):
    name = draw(NAMES | JUNK)
    shape = draw(st.integers(0, 8))
    if shape == 0:
        return name
    if shape == 1:
        return f"{name} " + " ".join(f"{draw(KEYS)}{draw(st.sampled_from(['=', ' = ', '']))}{draw(VALUES)}"
                                     for _ in range(draw(st.integers(1, 3))))
    if shape == 2:
        return f"{name}:{draw(VALUES)}"
    if shape == 3:
        return f"{draw(USERS)}@{name}" + draw(st.sampled_from(["", ":"])) + draw(VALUES)
    if shape == 4:
        return "# " + draw(JUNK)
    if shape == 5:
        return draw(st.sampled_from(["", "   ", "\t", "\x0c"]))
    if shape == 6:
        return f"{name} {draw(JUNK)}"
    if shape == 7:
        return f"{name}  # {draw(JUNK)}"
    return draw(JUNK)


GOOD_NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,6}[0-9]", fullmatch=True) | st.sampled_from(
    ["10.0.0.7", "172.22.128.95", "fe80::1", "::1", "Worker0"])


@st.composite
def good_hostfiles(draw):
    """Mostly valid hostfiles, so that the properties of a successful parse get exercised."""
    names = draw(st.lists(GOOD_NAMES, min_size=1, max_size=6, unique_by=str.lower))
    slots = st.integers(1, 16).map(str)
    lines = [draw(st.sampled_from([
        f"{n}", f"{n} slots={draw(slots)}", f"{n} slots = {draw(slots)} max_slots=16", f"root@{n}",
        f"{n}:{draw(slots)}" if ":" not in n else n, f"# {n}", "", f"{n}  # comment",
    ])) for n in names]
    return "\n".join(lines)


HOSTFILES = good_hostfiles() | st.lists(hostfile_lines(), max_size=8).flatmap(
    lambda lines: st.sampled_from(["\n", "\r\n"]).map(lambda end: end.join(lines))) | st.text(max_size=80)


@st.composite
def good_host_lists(draw):
    names = draw(st.lists(GOOD_NAMES.filter(lambda n: ":" not in n), min_size=1, max_size=5))
    return ",".join(n if draw(st.booleans()) else f"{n}:{draw(st.integers(1, 16))}" for n in names)


@st.composite
def host_lists(draw):
    items = []
    for _ in range(draw(st.integers(1, 5))):
        name = draw(NAMES | JUNK)
        items.append(name if draw(st.booleans()) else f"{name}:{draw(VALUES)}")
    return ",".join(items)


# ---------------------------------------------------------------- hostfiles

def _line_of(message: str):
    match = re.search(r" line (\d+)", message)
    return int(match.group(1)) if match else None


@FUZZ
@given(text=HOSTFILES, fmt=st.sampled_from(["auto", "pssh"]))
def test_parse_hostfile(text, fmt):
    entries, message = only_our_error(parse_hostfile, text, "hostfile /fuzz/h", fmt)
    lines = text.split("\n")
    if message is not None:
        assert message.startswith("hostfile /fuzz/h")
        number = _line_of(message)
        if number is None:
            assert "no hosts in it" in message
        else:   # the message names the line, and something written on it
            assert 1 <= number <= len(lines)
            assert mentions(message, lines[number - 1].split("#")[0]), (message, lines[number - 1])
        return
    assert entries, "a parse with no hosts must be an error"
    assert len({e.name.lower() for e in entries}) == len(entries)
    for entry in entries:
        assert check_host_name(entry.name, "x") == entry.name
        assert entry.slots >= 1 and 1 <= entry.line <= len(lines)
        assert entry.port is None or 1 <= entry.port <= 65535


# ---------------------------------------------------------------- host lists

@FUZZ
@given(text=good_host_lists() | host_lists() | st.text(max_size=40))
def test_parse_host_list(text):
    entries, message = only_our_error(parse_host_list, text, "-H")
    if message is not None:
        assert message.startswith("-H")
        match = re.search(r" item (\d+)", message)
        item = split_outside_brackets(text.strip())[int(match.group(1)) - 1] if match else text
        assert mentions(message, item), (message, item)
        return
    assert entries and len({e.name.lower() for e in entries}) == len(entries)
    assert all(check_host_name(e.name, "x") == e.name and e.slots >= 1 for e in entries)


# ---------------------------------------------------------------- the environment

@pytest.fixture(scope="module")
def hostfile_dir():
    with tempfile.TemporaryDirectory(prefix="fuzz-hostfiles-") as name:
        folder = Path(name)
        (folder / "good").write_text("worker0 slots=8\nworker1 slots=8\n")
        (folder / "bad").write_text("worker0 slots=8\nworker1 slots=eight\n")
        (folder / "empty").write_text("# nothing\n")
        (folder / "binary").write_bytes(b"\xff\xfe\x00")
        (folder / "folder").mkdir()
        yield folder


COUNTS = st.sampled_from(["", "0", "1", "2", "3", "8", "16", "x", "-2", "2.0", "\u00b2", "9" * 25, "100001"])
PORTS = COUNTS | st.sampled_from(["29500", "65535", "65536", "70000"])
HOST_VALUES = good_host_lists() | NAMES | JUNK | host_lists()
SLURM_TASKS = st.sampled_from(["1", "8", "8(x2)", "8(x2),4", "0", "2(x0)", "x", "4(x999999999)", "", "1,1,1"])
VARIABLES = {
    "MLP_MPI_HOSTS": HOST_VALUES,
    "MLP_WORKER_NUM": COUNTS,
    "MLP_WORKER_GPU": COUNTS,
    "MLP_WORKER_0_HOST": HOST_VALUES,
    "MLP_WORKER_1_HOST": HOST_VALUES,
    "MLP_WORKER_2_HOST": HOST_VALUES,
    "MLP_WORKER_0_PORT": PORTS,
    "MLP_WORKER_ALL_HOSTS": HOST_VALUES,
    "MASTER_ADDR": HOST_VALUES,
    "MASTER_PORT": PORTS,
    "WORLD_SIZE": COUNTS,
    "LOCAL_WORLD_SIZE": COUNTS,
    "AZ_BATCH_HOST_LIST": HOST_VALUES,
    "SLURM_JOB_NODELIST": HOST_VALUES,
    "SLURM_NODELIST": HOST_VALUES,
    "SLURM_TASKS_PER_NODE": SLURM_TASKS,
    "SLURM_NTASKS_PER_NODE": SLURM_TASKS,
}


def _environments(folder):
    names = st.sampled_from(["good", "bad", "empty", "binary", "folder", "missing"])
    paths = names.map(lambda name: str(folder / name))
    relative = st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), max_size=8)
    return st.fixed_dictionaries({}, optional={"MLP_MPI_HOSTFILE": paths | relative, **VARIABLES})


@FUZZ
@given(data=st.data())
def test_topology_from_environment(hostfile_dir, data):
    env = data.draw(_environments(hostfile_dir), label="env")
    option = data.draw(st.sampled_from(["none", "hosts", "hostfile"]), label="option")
    kwargs = {}
    if option == "hosts":
        kwargs["hosts"] = data.draw(HOST_VALUES, label="hosts")
    elif option == "hostfile":
        name = data.draw(st.sampled_from(["good", "bad", "empty", "missing"]), label="hostfile")
        kwargs["hostfile"] = str(hostfile_dir / name)
    topology, message = only_our_error(topology_from_environment, env, local_slots=lambda: 2, **kwargs)
    if message is not None:
        given_values = list(env.values()) + list(kwargs.values())
        # a hostfile's own errors name its line; others name the variable's value
        assert mentions(message, *given_values) or re.search(r" line \d+ '", message), (message, env, kwargs)
        return
    assert isinstance(topology, Topology) and topology.hosts
    assert len({h.name.lower() for h in topology.hosts}) == len(topology.hosts)
    assert all(check_host_name(h.name, "x") and h.slots >= 1 for h in topology.hosts)
    assert check_host_name(topology.master_addr, "x")
    assert topology.master_port is None or 1 <= topology.master_port <= 65535
    if topology.total_slots <= 4096:   # (the layout itself is property-tested in test_topology.py)
        assert len(topology.layout(topology.total_slots)) == topology.total_slots


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


# ---------------------------------------------------------------- engineer D's parsers

RANK_SPECS = st.lists(st.sampled_from(["0", "1", "3", "2-5", "5-2", "all", "ALL", "", " ", "x", "-1", "1-",
                                       "9" * 30, "0-1048576", "7"]) | JUNK, max_size=4).map(",".join)


GOOD_RANKS = st.lists(st.integers(0, 15).flatmap(
    lambda a: st.sampled_from([str(a), f"{a}-{a + 2}"])), min_size=1, max_size=4).map(",".join)


@FUZZ
@given(spec=GOOD_RANKS | RANK_SPECS | st.text(max_size=30), world_size=st.none() | st.integers(-2, 20))
def test_parse_ranks(spec, world_size):
    ranks, message = only_our_error(parse_ranks, spec, world_size)
    if message is not None:
        assert mentions(message, spec, str(world_size)), (message, spec, world_size)
        return
    assert ranks == sorted(set(ranks)) and all(r >= 0 for r in ranks)
    assert world_size is None or all(r < world_size for r in ranks)


@FUZZ
@given(spec=good_host_lists() | host_lists() | st.text(max_size=40))
def test_expand_hosts(spec):
    names, message = only_our_error(expand_hosts, spec)
    if message is not None:
        assert mentions(message, spec), (message, spec)
        return
    assert len(set(names)) == len(names) and all(isinstance(n, str) and n for n in names)


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
    from mlp_magic.core.stack_jobs import parse_scan

    scan = parse_scan("w", text)
    assert scan.error is None or (scan.error and "\n" not in scan.error)
