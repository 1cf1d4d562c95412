"""The rank-side output tee: every byte to the log, a capped share to the notebook, and never an
exception into the user's print() when the log cannot be written."""
import io
import os

from mlp_magic.engine.capture import CELL_TAG, TeeStream, cell_log_dir, open_rank_log


def test_tee_logs_everything_and_forwards_up_to_the_cap(tmp_path):
    notebook = io.StringIO()
    tee = TeeStream(notebook, str(tmp_path / "cell" / "rank0.stdout"), cap=10)
    tee.write("0123456789abcdef")
    tee.write("ghij")
    tee.close_log()
    assert notebook.getvalue() == "0123456789"
    assert (tmp_path / "cell" / "rank0.stdout").read_text() == "0123456789abcdefghij"
    assert tee.capped == 10


def test_silent_streams_create_no_file(tmp_path):
    tee = TeeStream(io.StringIO(), str(tmp_path / "cell" / "rank0.stderr"), cap=10)
    tee.close_log()
    assert not (tmp_path / "cell").exists()


def test_an_unwritable_log_path_falls_back_to_this_hosts_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    handle, where = open_rank_log(str(blocked / "20261121-cell" / "rank3.stdout"))
    handle.close()
    assert where == str(tmp_path / "home" / ".mlp_magic" / "logs" / "20261121-cell" / "rank3.stdout")


def test_when_no_log_can_be_written_printing_still_works(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("x")
    monkeypatch.setenv("HOME", str(blocked))  # the fallback is impossible too
    notebook = io.StringIO()
    tee = TeeStream(notebook, str(blocked / "cell" / "rank0.stdout"), cap=100)
    assert tee.write("hello\n") == 6
    assert notebook.getvalue() == "hello\n"
    assert "Not a directory" in tee.log_error or "not a directory" in tee.log_error.lower()


def test_cell_tag_round_trip():
    assert cell_log_dir(f"print(1)\n{CELL_TAG}/tmp/x/cell-1\n") == "/tmp/x/cell-1"
    assert cell_log_dir("print(1)\n# a comment") is None
    assert os.path.basename(cell_log_dir(f"x = 1\n{CELL_TAG}/a b/c\n")) == "c"
