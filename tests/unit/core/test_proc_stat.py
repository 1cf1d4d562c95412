"""Start times from /proc texts: the command name may hold anything, psutil agrees."""
from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.proc_stat import create_time, parse_boot_time, parse_stat

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
