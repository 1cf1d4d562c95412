"""engine/private_files: folders we create are 0700 and files 0600 whatever the umask (even 0),
a wider file of ours is narrowed when written again, a folder that was there is left alone; the
cell logs (engine/capture, output/logs) use them."""
import os
import stat

import pytest

from mlp_magic.engine.capture import open_rank_log
from mlp_magic.engine.private_files import (narrow_tree, open_private, private_dirs, private_file,
                                            write_private)
from mlp_magic.output import logs


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture(autouse=True)
def open_umask():
    old = os.umask(0)   # the widest: nothing is taken off by the umask
    yield
    os.umask(old)


def test_every_folder_made_is_0700_and_one_that_was_there_is_left(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    private_dirs(str(shared / "a" / "b" / "c"))
    assert [mode(shared / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3
    assert mode(shared) == 0o755
    assert private_dirs(str(shared)) == str(shared) and mode(shared) == 0o755


def test_files_are_0600_new_or_of_ours_and_wider(tmp_path):
    old = tmp_path / "old.txt"
    old.write_text("x")
    old.chmod(0o644)
    with open_private(str(old), "a") as handle:
        handle.write("y")
    assert mode(old) == 0o600 and old.read_text() == "xy"
    write_private(str(tmp_path / "new" / "f.json"), "{}")
    assert mode(tmp_path / "new") == 0o700 and mode(tmp_path / "new" / "f.json") == 0o600
    with open_private(str(tmp_path / "b.log"), "ab") as handle:
        handle.write(b"bytes")
    assert mode(tmp_path / "b.log") == 0o600
    assert mode(private_file(str(tmp_path / "s" / "1.txt"))) == 0o600


def test_narrow_tree_keeps_the_owners_bits(tmp_path):
    (tmp_path / "d").mkdir(mode=0o755)
    (tmp_path / "d" / "README").write_text("r")
    (tmp_path / "d" / "README").chmod(0o644)
    (tmp_path / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "tool").chmod(0o755)
    assert narrow_tree(str(tmp_path)) == 3
    modes = mode(tmp_path / "d"), mode(tmp_path / "d" / "README"), mode(tmp_path / "tool")
    assert modes == (0o700, 0o600, 0o700)


def test_rank_logs_and_the_kernels_cell_files_are_private(tmp_path):
    handle, path = open_rank_log(str(tmp_path / "logs" / "cell-1" / "rank0.stdout"))
    handle.close()
    assert mode(path) == 0o600
    assert mode(tmp_path / "logs") == 0o700 and mode(tmp_path / "logs" / "cell-1") == 0o700
    cell = tmp_path / "logs" / "cell-2"
    logs.write_stacks(str(cell), {0: "Thread 0x1\n"}).result()
    assert mode(cell) == 0o700 and mode(cell / "stacks") == 0o700
    assert mode(cell / "stacks" / "rank0.txt") == 0o600
