"""Cell log folders: a new one per cell; the kernel's first cell prunes its log root."""
from __future__ import annotations

import os
import time

from mlp_magic import config
from mlp_magic.output import logs
from tests.unit.cell_logs import cell_name, make_cell


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
    monkeypatch.setenv(config.LOG_KEEP_DAYS, "0")   # keep everything
    logs.new_cell_dir()
    logs._writer.submit(lambda: None).result(10)
    assert os.path.exists(again)
