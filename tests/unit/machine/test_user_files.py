"""machine/user_files: a file the user names is read within a bound, never a device, a pipe or a
folder, and a refusal is one short line that never repeats the file's content."""
from __future__ import annotations

import os
import signal

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.machine.user_files import QUOTED, read_bytes, read_text, shown
from tests.unit.parser_errors import error_of


def test_a_file_is_read_whole(tmp_path):
    path = tmp_path / "hostfile"
    path.write_text("worker0 slots=8\n")
    assert read_text(str(path), "--hostfile", 1024) == "worker0 slots=8\n"
    assert read_bytes(str(path), "--hostfile", 16) == b"worker0 slots=8\n"


def test_dev_zero_is_refused_before_a_byte_is_read():
    assert error_of(read_text, "/dev/zero", "--from-file", 1 << 20) == \
        "--from-file '/dev/zero': a device, not a file"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = str(tmp_path / "fifo")
    os.mkfifo(fifo)
    signal.alarm(10)   # opening it for reading would wait for a writer: a hang fails the test
    try:
        said = error_of(read_text, fifo, "--hostfile", 1024)
        assert said == f"--hostfile {shown(fifo)}: a pipe, not a file"
    finally:
        signal.alarm(0)


def test_a_folder_a_missing_file_and_one_past_the_bound(tmp_path):
    assert error_of(read_text, str(tmp_path), "x", 9) == f"x {shown(str(tmp_path))}: a folder, not a file"
    missing = str(tmp_path / "no")
    assert error_of(read_text, missing, "x", 9) == f"x {shown(missing)}: no such file"
    big = tmp_path / "big"
    big.write_bytes(b"a" * 2048)
    assert error_of(read_text, str(big), "x", 1024) == \
        f"x {shown(str(big))}: larger than 1 KiB, not a file of this kind"
    assert read_text(str(big), "x", 2048) == "a" * 2048   # the bound itself is allowed


def test_binary_content_is_named_by_its_first_bad_byte_not_repeated(tmp_path):
    path = tmp_path / "binary"
    path.write_bytes(b"secret-line\n\xff\xfe" + b"more secrets" * 100)
    message = error_of(read_text, str(path), "--hostfile", 1 << 20)
    assert message.startswith(f"--hostfile {shown(str(path))}: not UTF-8 text (byte 12: ")
    assert "secret" not in message


def test_an_unreadable_file_names_the_reason(tmp_path):
    path = tmp_path / "locked"
    path.write_text("x")
    path.chmod(0)
    if os.geteuid() == 0:   # root reads anything: a path under a plain file fails for everyone
        path = tmp_path / "locked" / "below"
    assert error_of(read_text, str(path), "x", 9).startswith(f"x {shown(str(path))}: ")


@given(st.text(max_size=400))
def test_shown_is_one_short_line(text):
    quoted = shown(text)
    assert len(quoted) <= QUOTED and "\n" not in quoted
    assert quoted == repr(text) or quoted.endswith("...'")
