"""Which cell log folders expire (pure)."""
from __future__ import annotations


import pytest

from mlp_magic.output.pure.retention import expired_cells
from mlp_magic.output.rank.retention import local_seconds
from tests.unit.cell_logs import DAY, NOW, cell_name


def test_a_cell_expires_when_its_start_and_its_last_change_are_both_older_than_the_limit():
    old, recent = cell_name(40), cell_name(2)
    entries = [(old, NOW - 40 * DAY), (recent, NOW - 2 * DAY),
               (cell_name(40, n=2), NOW - 1 * DAY),     # started long ago, written to lately
               (cell_name(31, n=3), NOW - 31 * DAY)]
    assert expired_cells(entries, NOW, 30, local_seconds) == sorted([old, cell_name(31, n=3)])
    assert expired_cells(entries, NOW, 1, local_seconds) == sorted([old, recent, cell_name(31, n=3)])


@pytest.mark.parametrize("name", ["notes", "20260101-000000", "20260101-000000-12-1",
                                  "20261340-000000-12-0001", "x20260101-000000-12-0001",
                                  "20260101-000000-12-0001.bak"])
def test_names_not_made_for_a_cell_never_expire(name):
    assert expired_cells([(name, 0.0)], NOW, 1, local_seconds) == []


def test_the_start_in_a_name_is_read_by_the_callers_clock_and_a_stamp_it_refuses_keeps_the_cell():
    name = cell_name(40)

    def refused(stamp):
        raise ValueError(stamp)
    assert expired_cells([(name, 0.0)], NOW, 30, refused) == []
    assert expired_cells([(name, 0.0)], NOW, 30, lambda stamp: NOW) == []        # started now
    assert expired_cells([(name, 0.0)], NOW, 30, lambda stamp: 0.0) == [name]
