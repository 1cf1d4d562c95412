"""Log retention: which cell directories expire (pure), and removing them from a real folder."""
from __future__ import annotations

import os
import time

import pytest

from mlp_magic import logs
from mlp_magic.errors import MlpMagicError

DAY = 86400.0
NOW = time.mktime((2026, 11, 21, 12, 0, 0, 0, 0, -1))


def cell_name(days_ago: float, pid: int = 4242, n: int = 1, now: float = NOW) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now - days_ago * DAY)) + f"-{pid}-{n:04d}"


def test_a_cell_expires_when_its_start_and_its_last_change_are_both_older_than_the_limit():
    old, recent = cell_name(40), cell_name(2)
    entries = [(old, NOW - 40 * DAY), (recent, NOW - 2 * DAY),
               (cell_name(40, n=2), NOW - 1 * DAY),     # started long ago, written to lately
               (cell_name(31, n=3), NOW - 31 * DAY)]
    assert logs.expired_cells(entries, NOW, 30) == sorted([old, cell_name(31, n=3)])
    assert logs.expired_cells(entries, NOW, 1) == sorted([old, recent, cell_name(31, n=3)])


@pytest.mark.parametrize("name", ["notes", "20260101-000000", "20260101-000000-12-1",
                                  "20261340-000000-12-0001", "x20260101-000000-12-0001",
                                  "20260101-000000-12-0001.bak"])
def test_names_not_made_for_a_cell_never_expire(name):
    assert logs.expired_cells([(name, 0.0)], NOW, 1) == []


@pytest.mark.parametrize("raw, days", [("", 30.0), ("0", 0.0), ("7", 7.0), (" 0.5 ", 0.5)])
def test_keep_days_from_the_environment(raw, days):
    assert logs.keep_days({logs.KEEP_DAYS_ENV: raw}) == days
    assert logs.keep_days({}) == logs.DEFAULT_KEEP_DAYS


@pytest.mark.parametrize("raw", ["-1", "a week", "nan", "inf"])
def test_a_bad_keep_days_value_is_named(raw):
    with pytest.raises(MlpMagicError, match=f"MLP_MAGIC_LOG_KEEP_DAYS={raw!r}: expected a number of days"):
        logs.keep_days({logs.KEEP_DAYS_ENV: raw})


def make_cell(root, name: str, days_ago: float, now: float = NOW) -> str:
    path = os.path.join(root, name)
    os.makedirs(path)
    with open(os.path.join(path, "rank0.stdout"), "w") as handle:
        handle.write("out\n")
    os.utime(path, (now - days_ago * DAY,) * 2)
    return path


def test_prune_removes_only_expired_cell_directories(tmp_path):
    root = str(tmp_path / "logs")
    old = make_cell(root, cell_name(40), 40)
    recent = make_cell(root, cell_name(3), 3)
    foreign = make_cell(root, "my-notes", 400)
    outside = make_cell(str(tmp_path), cell_name(50, n=7), 50)   # a link's target, elsewhere
    link = os.path.join(root, cell_name(45, n=8))
    os.symlink(outside, link)
    plain_file = os.path.join(root, cell_name(60, n=9))
    open(plain_file, "w").close()
    os.utime(plain_file, (NOW - 60 * DAY,) * 2)

    assert logs.prune(root, 30, now=NOW) == [os.path.basename(old)]
    assert not os.path.exists(old)
    assert all(os.path.exists(p) for p in (recent, foreign, link, plain_file, outside))
    assert os.path.exists(os.path.join(outside, "rank0.stdout"))
    assert logs.prune(str(tmp_path / "missing"), 30) == []


def test_the_first_cell_of_a_kernel_prunes_its_log_root(tmp_path, monkeypatch):
    root = str(tmp_path / "logs")
    monkeypatch.setenv("MLP_MAGIC_LOG_DIR", root)
    monkeypatch.setattr(logs, "_pruned_roots", set())
    now = time.time()
    old = make_cell(root, cell_name(40, now=now), 40, now)
    again = make_cell(root, cell_name(41, n=2, now=now), 41, now)
    os.rename(again, again + "x")   # not a cell name while the first prune runs
    first = logs.new_cell_dir()
    assert os.path.dirname(first) == root
    logs._writer.submit(lambda: None).result(10)   # the prune ran before it
    assert not os.path.exists(old)
    os.rename(again + "x", again)
    logs.new_cell_dir()
    logs._writer.submit(lambda: None).result(10)
    assert os.path.exists(again)   # once per kernel and root, not per cell

    monkeypatch.setattr(logs, "_pruned_roots", set())
    monkeypatch.setenv(logs.KEEP_DAYS_ENV, "0")   # keep everything
    logs.new_cell_dir()
    logs._writer.submit(lambda: None).result(10)
    assert os.path.exists(again)
