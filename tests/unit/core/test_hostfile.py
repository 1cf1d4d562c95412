"""Hostfiles and host lists: every format of platform.md section 3, and one clear error per bad input."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.hostfile import (MAX_SLOTS, HostEntry, check_host_name, parse_count, parse_host_list,
                                     parse_hostfile, split_outside_brackets)
from mlp_magic.errors import MlpMagicError
from tests.unit.parser_errors import error_of


def hosts(entries):
    """(name, slots) pairs: what most tests compare."""
    return [(e.name, e.slots) for e in entries]


# ---------------------------------------------------------------- OpenMPI / DeepSpeed / Horovod

def test_openmpi_hostfile_with_comments_blank_lines_and_max_slots():
    text = """# the job's hosts
worker0 slots=8 max_slots=8

worker1 slots=8   # rack B
   # indented comment
worker2
"""
    entries = parse_hostfile(text, "hostfile /etc/mlp/hostfile")
    assert hosts(entries) == [("worker0", 8), ("worker1", 8), ("worker2", 1)]
    assert [e.line for e in entries] == [2, 4, 6]
    assert all(e.port is None and e.user is None for e in entries)


def test_platform_example_line():
    assert parse_hostfile("172.22.128.95 slots=2\n") == [HostEntry("172.22.128.95", 2, line=1)]


@pytest.mark.parametrize("line, slots", [
    ("node slots=4", 4),
    ("node slots = 4", 4),        # OpenMPI's lexer allows spaces around '='
    ("node slots= 4", 4),
    ("node count=3", 3),
    ("node cpu=2", 2),
    ("node max_slots=6", 1),      # no slots=: one slot, at most six
    ("node max-slots=6 slots=6", 6),
    ("node slots=2 slots_max=4", 2),
    ("node\tslots=5", 5),
])
def test_openmpi_keys(line, slots):
    assert hosts(parse_hostfile(line)) == [("node", slots)]


def test_openmpi_user_and_port():
    entries = parse_hostfile("alice@node1 slots=2\nnode2 username=bob port=2222\n")
    assert [(e.name, e.slots, e.user, e.port) for e in entries] == [
        ("node1", 2, "alice", None), ("node2", 1, "bob", 2222)]


def test_windows_line_endings_and_form_feed_keep_line_numbers():
    entries = parse_hostfile("a slots=2\r\n\x0c\r\nb slots=3\r\n")
    assert [(e.name, e.slots, e.line) for e in entries] == [("a", 2, 1), ("b", 3, 3)]
    assert "line 3 " in error_of(parse_hostfile, "a\n\x0c\nb slots=0\n")


def test_ipv6_addresses():
    entries = parse_hostfile("fe80::1 slots=2\n::1\n2001:db8::7\n")
    assert hosts(entries) == [("fe80::1", 2), ("::1", 1), ("2001:db8::7", 1)]


def test_node_sets_in_a_hostfile():
    entries = parse_hostfile("gpu[01-02] slots=4\nworker[0-1]:8\n")
    assert hosts(entries) == [("gpu01", 4), ("gpu02", 4), ("worker0", 8), ("worker1", 8)]
    assert [e.line for e in entries] == [1, 1, 2, 2]


# ---------------------------------------------------------------- MPICH / Hydra

def test_mpich_machinefile():
    entries = parse_hostfile("donner:2\nfoo:3   # the next three\nshakey\n")
    assert hosts(entries) == [("donner", 2), ("foo", 3), ("shakey", 1)]


# ---------------------------------------------------------------- pssh

def test_pssh_lines_with_user_are_read_as_pssh_in_auto_mode():
    entries = parse_hostfile("root@worker0:2222\nroot@worker1\n")
    assert [(e.name, e.slots, e.user, e.port) for e in entries] == [
        ("worker0", 1, "root", 2222), ("worker1", 1, "root", None)]


def test_pssh_format_reads_the_number_as_a_port():
    entries = parse_hostfile("worker0:2222\nworker1:22 alice\n[fe80::1]:2200\nbob@10.0.0.5\n", fmt="pssh")
    assert [(e.name, e.slots, e.user, e.port) for e in entries] == [
        ("worker0", 1, None, 2222), ("worker1", 1, "alice", 22), ("fe80::1", 1, None, 2200),
        ("10.0.0.5", 1, "bob", None)]


def test_same_text_auto_reads_slots():
    assert hosts(parse_hostfile("worker0:22\n")) == [("worker0", 22)]


# ---------------------------------------------------------------- hostfile errors

@pytest.mark.parametrize("text, parts", [
    ("a slots=0\n", ["line 1 'a slots=0'", "slots must be a positive integer, got '0'"]),
    ("a slots=-1\n", ["line 1", "slots must be a positive integer, got '-1'"]),
    ("a slots=x\n", ["got 'x'"]),
    ("a slots=2.5\n", ["got '2.5'"]),
    ("a slots=\u00b2\n", ["got '\u00b2'"]),                 # isdigit() but not int()
    ("a slots=" + "9" * 5000 + "\n", ["slots '999", f"is more than {MAX_SLOTS}"]),
    (f"a slots={MAX_SLOTS + 1}\n", [f"slots '{MAX_SLOTS + 1}' is more than"]),
    ("a slots=\n", ["got ''", "'a slots='"]),
    ("a:0\n", ["line 1 'a:0'", "got '0'"]),
    ("a:x\n", ["got 'x'"]),
    ("\n\nok\nbad slots=two\n", ["line 4 'bad slots=two'", "got 'two'"]),
    ("a slots=4 max_slots=2\n", ["max_slots=2 is below slots=4"]),
    ("a slots=2 count=3\n", ["slots given twice ('count=3')"]),
    ("a slot=2\n", ["unexpected 'slot=2'", "expected slots=N"]),
    ("a b\n", ["unexpected 'b'"]),
    ("alice@a username=bob\n", ["user given twice"]),
    ("a port=70000\n", ["ssh port '70000' is more than 65535"]),
    ("a port=0\n", ["ssh port must be a positive integer, got '0'"]),
    ("user@a:70000\n", ["line 1 'user@a:70000'", "65535"]),
    ("user@a:ssh\n", ["got 'ssh'"]),
    ("us;er@a\n", ["invalid user name 'us;er'"]),
    ("@a\n", ["invalid user name ''", "'@a'"]),
    ("user@\n", ["empty host name", "'user@'"]),
    (":4\n", ["empty host name", "':4'"]),
])
def test_hostfile_errors_name_source_line_and_value(text, parts):
    message = error_of(parse_hostfile, text, "hostfile /etc/mlp/hostfile")
    assert message.startswith("hostfile /etc/mlp/hostfile")
    for part in parts:
        assert part in message


@pytest.mark.parametrize("name", [
    "a;b", "$(reboot)", "`id`", "a|b", "a&b", "a>b", "-oProxyCommand=x", "a'b", 'a"b', "a\\b",
    "a/b", "..", ".", "a.", "-a", "a*", "a?b", "[::1]", "x" * 254, "1:2:3", "\u00e9cole",
])
def test_hostfile_refuses_shell_and_option_syntax_in_names(name):
    message = error_of(parse_hostfile, f"{name} slots=2\n", "hostfile h")
    assert message.startswith("hostfile h line 1")
    assert "invalid host name" in message or "host list" in message


@pytest.mark.parametrize("text, line, first", [
    ("a\nb\na slots=2\n", 3, 1),
    ("Worker0\nworker0\n", 2, 1),           # host names are case-insensitive
    ("w[0-2]:2\nw1\n", 2, 1),
    ("a:2\n\n# x\nb\nA:3\n", 5, 1),
])
def test_duplicate_hosts(text, line, first):
    message = error_of(parse_hostfile, text, "hostfile f")
    assert message.startswith("hostfile f: host ")
    assert f"is listed twice (lines {first} and {line}; list it once)" in message


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n   # another\n", "  \t \n"])
def test_empty_hostfile(text):
    assert error_of(parse_hostfile, text, "hostfile /tmp/h") == \
        "hostfile /tmp/h: no hosts in it (empty, or only comments)"


def test_unknown_format():
    assert "unknown hostfile format 'yaml'" in error_of(parse_hostfile, "a", fmt="yaml")


def test_pssh_format_errors():
    assert "unexpected 'c'" in error_of(parse_hostfile, "a b c\n", fmt="pssh")
    assert "user given twice" in error_of(parse_hostfile, "u@a v\n", fmt="pssh")
    assert "invalid user name '1x'" in error_of(parse_hostfile, "a 1x\n", fmt="pssh")


def test_long_lines_are_shortened_in_messages():
    message = error_of(parse_hostfile, "a slots=" + "x" * 10_000)
    assert len(message) < 300 and "..." in message


# ---------------------------------------------------------------- -H / MLP_MPI_HOSTS lists

@pytest.mark.parametrize("text, expected", [
    ("worker0:8,worker1:8", [("worker0", 8), ("worker1", 8)]),
    ("aa,aa,bb", [("aa", 2), ("bb", 1)]),                 # OpenMPI: repeats add slots
    ("aa:2,bb,aa:3", [("aa", 5), ("bb", 1)]),
    ("worker[0-3]:8", [(f"worker{i}", 8) for i in range(4)]),
    ("gpu[01-02,07]:4,login", [("gpu01", 4), ("gpu02", 4), ("gpu07", 4), ("login", 1)]),
    ("w[0-1]", [("w0", 1), ("w1", 1)]),
    (" a:2 , b ", [("a", 2), ("b", 1)]),
    ("10.0.0.7:8,10.0.0.5:8", [("10.0.0.7", 8), ("10.0.0.5", 8)]),
    ("Node1,node1", [("Node1", 2)]),                       # case-insensitive, first spelling kept
    ("fe80::1,::1", [("fe80::1", 1), ("::1", 1)]),        # IPv6: one slot each
    ("fe80::1:2", [("fe80::1:2", 1)]),                    # ... never "fe80::1" with 2 slots
    ("a:007", [("a", 7)]),
])
def test_host_lists(text, expected):
    assert hosts(parse_host_list(text)) == expected


def test_host_list_items_are_numbered():
    entries = parse_host_list("a,b,a,c:2")
    assert [(e.name, e.line) for e in entries] == [("a", 1), ("b", 2), ("c", 4)]


@pytest.mark.parametrize("text, parts", [
    ("", ["$MLP_MPI_HOSTS: empty host list"]),
    ("   ", ["empty host list"]),
    ("a,,b", ["item 2: empty entry in 'a,,b'"]),
    ("a,", ["item 2: empty entry"]),
    ("a:0", ["item 1 'a:0'", "slots must be a positive integer, got '0'"]),
    ("a:x,b", ["item 1 'a:x'", "got 'x'"]),
    ("ok:1,b:", ["item 2 'b:'", "got ''"]),
    ("a:-2", ["got '-2'"]),
    (":3", ["item 1 ':3'", "empty host name"]),
    ("a;rm -rf /:2", ["invalid host name 'a;rm -rf /'"]),
    ("w[0-3", ["unclosed '['", "w[0-3"]),
    ("w]0", ["']' without '['"]),
    ("w[3-1]:2", ["range 3-1 goes backwards"]),
    ("w[a-b]", ["'a-b' is not a number"]),
    ("x[0-1];y", ["invalid host name 'x0;y'"]),
    (f"a:{MAX_SLOTS},a:1", [f"host 'a' adds up to more than {MAX_SLOTS} slots"]),
    ("fe80::zz", ["invalid host name 'fe80::zz'"]),
])
def test_host_list_errors(text, parts):
    message = error_of(parse_host_list, text, "$MLP_MPI_HOSTS")
    assert message.startswith("$MLP_MPI_HOSTS")
    for part in parts:
        assert part in message


def test_host_list_refuses_non_text():
    assert error_of(parse_host_list, None) == "-H: empty host list"


# ---------------------------------------------------------------- helpers

@pytest.mark.parametrize("text, items", [
    ("a,b", ["a", "b"]),
    ("w[0-3,7]:8,x", ["w[0-3,7]:8", "x"]),
    ("", [""]),
    ("a,", ["a", ""]),
    ("r[1-2]-n[0,3],z", ["r[1-2]-n[0,3]", "z"]),
])
def test_split_outside_brackets(text, items):
    assert split_outside_brackets(text) == items


@pytest.mark.parametrize("name", ["worker0", "gpu-01.cluster.local", "a", "A_b", "10.0.0.1", "::1",
                                  "fe80::1%eth0", "x" * 253, "2001:db8::ff00:42:8329"])
def test_check_host_name_accepts(name):
    assert check_host_name(name, "here") == name


def test_check_host_name_messages():
    assert error_of(check_host_name, "", "$MLP_WORKER_3_HOST") == "$MLP_WORKER_3_HOST: empty host name"
    assert error_of(check_host_name, "a b", "-H item 1") == (
        "-H item 1: invalid host name 'a b' (letters, digits, '.', '-', '_', or an IP address)")
    assert "'fe80::1%e;x'" in error_of(check_host_name, "fe80::1%e;x", "w")


@given(st.text(max_size=25), st.sampled_from([0, 1]), st.sampled_from([1, 8, 65535]))
def test_one_count_parser_for_hostfiles_and_variables(text, least, limit):
    """core/hostfile.parse_count: ASCII digits from ``least`` up to ``limit``, else one line."""
    try:
        value = parse_count(text, "$X", limit, least)
    except MlpMagicError as error:
        assert str(error).startswith("$X ")
        assert not (text.isascii() and text.isdigit() and least <= int(text) <= limit)
    else:
        assert text.isascii() and text.isdigit() and value == int(text) and least <= value <= limit
