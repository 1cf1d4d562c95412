"""stacks/scan._process on a /proc laid out by hand: a Python whose environment cannot be read is
another user's only while it still exists (one that ended between two reads is no finding)."""
from __future__ import annotations

import os
import sys

from mlp_magic.stacks import scan


def fake_proc(root, pid: int, stat: bytes | None) -> None:
    folder = root / str(pid)
    folder.mkdir()
    (folder / "cmdline").write_bytes(b"python3\0job.py\0")
    os.symlink(sys.executable, folder / "exe")
    if stat is not None:
        (folder / "stat").write_bytes(stat)
    # no "environ": it cannot be read


def test_an_unreadable_environment_is_another_users_only_while_the_process_lives(tmp_path, monkeypatch):
    monkeypatch.setattr(scan, "PROC", str(tmp_path))
    fake_proc(tmp_path, 101, b"101 (python3) S 1 101 101 0 -1 4194560 0 0")   # alive
    fake_proc(tmp_path, 102, None)                                             # ended meanwhile
    fake_proc(tmp_path, 103, b"103 (python3) Z 1 103 103 0 -1 4194564 0 0")   # a zombie
    fake_proc(tmp_path, 104, b"104 (python3) R 1 104 104 0 -1 4194564 0 0")   # in exit(): PF_EXITING
    assert scan._process(101)["unreadable"] is True
    assert scan._process(102) is None and scan._process(103) is None and scan._process(104) is None
