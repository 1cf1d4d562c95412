"""Fuzz the parsers of hosts and ranks (hypothesis: hostfiles, host lists, the environment, rank specs;
(no chained exception), and its message names the offending value or a recognisable part of it.
When a parse succeeds, what it returns is sound (valid host names, positive slots, ...)."""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.hostfile import check_host_name, parse_host_list, parse_hostfile, split_outside_brackets
from mlp_magic.core.ranges import expand_hosts, parse_ranks
from mlp_magic.core.topology import Topology
from mlp_magic.machine.topology import topology_from_environment

from tests.unit.fuzz_checks import FUZZ, JUNK, mentions, only_our_error


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
    """The line a message names (of "lines 1 and 2", the second: where the repeat is)."""
    match = re.search(r"\blines? (\d+)(?: and (\d+))?", message)
    return int(match.group(2) or match.group(1)) if match else None


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
