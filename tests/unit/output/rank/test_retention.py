"""Removing expired cell folders from a real log root."""
from __future__ import annotations

import os

from mlp_magic.output.rank.retention import prune
from tests.unit.cell_logs import DAY, NOW, cell_name, make_cell


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

    assert prune(root, 30, now=NOW) == [os.path.basename(old)]
    assert not os.path.exists(old)
    assert all(os.path.exists(p) for p in (recent, foreign, link, plain_file, outside))
    assert os.path.exists(os.path.join(outside, "rank0.stdout"))
    assert prune(str(tmp_path / "missing"), 30) == []
