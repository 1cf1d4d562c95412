"""Start times from /proc texts: the command name may hold anything, psutil agrees."""
from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.proc_stat import SAME_START_S, create_time, lives, parse_boot_time, parse_stat

from tests.unit.fuzz_checks import FUZZ


def stat_line(pid: int, name: bytes, state: bytes, start: int) -> bytes:
    rest = [state] + [b"0"] * 18 + [str(start).encode()] + [b"0"] * 30
    return str(pid).encode() + b" (" + name + b") " + b" ".join(rest) + b"\n"


@FUZZ
@given(st.integers(1, 4 * 10 ** 6), st.binary(max_size=16), st.sampled_from([b"R", b"S", b"Z", b"D"]),
       st.integers(0, 10 ** 12))
def test_the_start_is_found_after_any_name(pid, name, state, start):
    assert parse_stat(stat_line(pid, name, state, start)) == (state.decode(), start)


@FUZZ
@given(st.binary(max_size=200))
def test_garbage_is_none_or_a_reading(data):
    found = parse_stat(data)
    assert found is None or (isinstance(found[1], int) and found[1] >= 0)
    assert parse_boot_time(data) is None or parse_boot_time(data) >= 0


def test_boot_time_and_create_time():
    boot = b"cpu  1 2 3\nbtime 1700000000\nprocesses 5\n"
    assert parse_boot_time(boot) == 1700000000.0
    assert create_time(stat_line(7, b"python3 (x)", b"S", 250), boot, 100) == 1700000002.5
    assert create_time(b"7 (x) S", boot, 100) is None
    assert create_time(stat_line(7, b"x", b"S", 1), b"", 100) is None


def test_this_process_agrees_with_psutil():
    import psutil

    with open(f"/proc/{os.getpid()}/stat", "rb") as stat, open("/proc/stat", "rb") as boot:
        ours = create_time(stat.read(), boot.read(), os.sysconf("SC_CLK_TCK"))
    assert abs(ours - psutil.Process().create_time()) < 0.011


BOOT = b"cpu  1 2 3\nbtime 1700000000\n"


@FUZZ
@given(st.binary(max_size=16), st.sampled_from([b"R", b"S", b"D", b"T", b"Z", b"X"]), st.integers(0, 10 ** 9),
       st.one_of(st.none(), st.floats(-SAME_START_S / 2, SAME_START_S / 2),   # not at the edge: floats
                 st.floats(SAME_START_S * 2, 1e6), st.floats(-1e6, -SAME_START_S * 2)))
def test_a_process_lives_unless_it_ended_or_started_at_another_time(name, state, ticks, offset):
    """A zombie (Z) or a dead task (X) has ended, whatever its start; another state lives, and with
    a known start time only as the process that started then (a reused pid started at another)."""
    stat = stat_line(9, name, state, ticks)
    known = None if offset is None else create_time(stat, BOOT, 100) + offset
    expected = state not in b"ZX" and (offset is None or abs(offset) < SAME_START_S)
    assert lives(stat, BOOT, 100, known) is expected


def test_an_unreadable_stat_or_boot_time_lives_not():
    assert not lives(b"", BOOT, 100, None)
    assert not lives(b"9 (x) S", BOOT, 100, None)
    assert lives(stat_line(9, b"x", b"S", 5), b"", 100, None)   # no start to check: the state says
    assert not lives(stat_line(9, b"x", b"S", 5), b"", 100, 1700000000.05)
