"""engine/start_slots: the host's start-slot folder is used only when it is ours and writable by
nobody else, its files never through a link, and a slot nobody lets go of is waited for a limited
time; each refusal is one line on the rank's stderr, and the rank then starts at once."""
from __future__ import annotations

import fcntl
import os
import threading
import time

import pytest

from mlp_magic.engine.start_slots import take_start_slot

NOBODY = 65534


def test_a_fresh_folder_is_made_private_and_its_slots_work(tmp_path):
    folder = tmp_path / "slots"
    held = take_start_slot(0, ["cpu0", "cpu1"], str(folder))
    assert held is not None and oct(folder.stat().st_mode & 0o777) == "0o700"
    assert oct(os.stat(held.name).st_mode & 0o777) == "0o600"
    held.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder someone else's needs root")
def test_a_folder_of_someone_else_is_refused_in_one_line(tmp_path, capsys):
    folder = tmp_path / "slots"
    folder.mkdir(mode=0o700)
    os.chown(folder, NOBODY, NOBODY)
    assert take_start_slot(0, ["cpu0"], str(folder)) is None
    err = capsys.readouterr().err
    assert err == (f"mlp_magic: start slots not used: {folder} is owned by uid {NOBODY}, "
                   f"not by this user (uid {os.getuid()})\n")
    assert list(folder.iterdir()) == []


def test_a_folder_others_may_write_or_a_link_is_refused(tmp_path, capsys):
    folder = tmp_path / "slots"
    folder.mkdir()
    folder.chmod(0o777)
    assert take_start_slot(0, ["cpu0"], str(folder)) is None
    assert capsys.readouterr().err == (f"mlp_magic: start slots not used: {folder} is writable by others "
                                       "(mode 777)\n")
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    assert take_start_slot(0, ["cpu0"], str(tmp_path / "link")) is None
    assert "is not a folder (a link or a file)" in capsys.readouterr().err


def test_a_slot_file_that_is_a_link_is_never_followed(tmp_path, capsys):
    folder = tmp_path / "slots"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    (folder / "cpu0").symlink_to(victim)
    assert take_start_slot(0, ["cpu0"], str(folder)) is None
    assert not victim.exists()
    assert "Too many levels of symbolic links" in capsys.readouterr().err


def _hold(path):
    handle = open(path, "a")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def test_a_slot_nobody_lets_go_of_is_waited_for_a_limited_time(tmp_path, capsys):
    folder = tmp_path / "slots"
    take_start_slot(0, ["cpu0"], str(folder)).close()
    holder = _hold(folder / "cpu0")   # a process that never lets go
    started = time.monotonic()
    assert take_start_slot(3, ["cpu0"], str(folder), wait_s=0.5) is None   # the main thread: a timer
    assert 0.4 < time.monotonic() - started < 5
    assert capsys.readouterr().err == (f"mlp_magic: rank 3: no start slot free in {folder} after 0.5 s "
                                       "(held by a process that does not let go?); starting without one\n")
    got = []
    waiter = threading.Thread(target=lambda: got.append(take_start_slot(1, ["cpu0"], str(folder), 0.3)))
    waiter.start()
    waiter.join(5)
    assert got == [None]
    holder.close()


def test_a_slot_freed_while_waiting_is_taken(tmp_path):
    folder = tmp_path / "slots"
    take_start_slot(0, ["cpu0"], str(folder)).close()
    holder = _hold(folder / "cpu0")
    threading.Timer(0.3, holder.close).start()
    taken = take_start_slot(1, ["cpu0"], str(folder), wait_s=10)
    assert taken is not None
    taken.close()


def test_a_rank_waits_for_a_slot_at_most_what_its_world_says_and_never_past_the_limit():
    from mlp_magic.engine.start_slots import SLOT_WAIT_S, WAIT_VARIABLE, wait_limit

    assert wait_limit({}) == SLOT_WAIT_S
    assert wait_limit({WAIT_VARIABLE: "17"}) == 17.0
    assert wait_limit({WAIT_VARIABLE: "1e9"}) == SLOT_WAIT_S
    for bad in ("", "x", "-3", "0", "nan"):
        assert wait_limit({WAIT_VARIABLE: bad}) == SLOT_WAIT_S, bad
