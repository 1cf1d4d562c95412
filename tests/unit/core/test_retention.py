"""Which cell log folders expire (pure)."""
from __future__ import annotations

import time

import pytest

from mlp_magic.core.retention import expired_cells

DAY = 86400.0
NOW = time.mktime((2026, 11, 21, 12, 0, 0, 0, 0, -1))


def cell_name(days_ago: float, pid: int = 4242, n: int = 1, now: float = NOW) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now - days_ago * DAY)) + f"-{pid}-{n:04d}"


def test_a_cell_expires_when_its_start_and_its_last_change_are_both_older_than_the_limit():
    old, recent = cell_name(40), cell_name(2)
    entries = [(old, NOW - 40 * DAY), (recent, NOW - 2 * DAY),
               (cell_name(40, n=2), NOW - 1 * DAY),     # started long ago, written to lately
               (cell_name(31, n=3), NOW - 31 * DAY)]
    assert expired_cells(entries, NOW, 30) == sorted([old, cell_name(31, n=3)])
    assert expired_cells(entries, NOW, 1) == sorted([old, recent, cell_name(31, n=3)])


@pytest.mark.parametrize("name", ["notes", "20260101-000000", "20260101-000000-12-1",
                                  "20261340-000000-12-0001", "x20260101-000000-12-0001",
                                  "20260101-000000-12-0001.bak"])
def test_names_not_made_for_a_cell_never_expire(name):
    assert expired_cells([(name, 0.0)], NOW, 1) == []
