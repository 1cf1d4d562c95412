"""What a rank sends for -o NAME: its logs' whole text, or one line saying why not."""
from __future__ import annotations

from mlp_magic.output.rank.whole_log import Unread, whole_logs


def test_each_log_whole_or_why_not(tmp_path):
    small, large, gone = tmp_path / "rank0.stdout", tmp_path / "rank0.stderr", tmp_path / "nope"
    small.write_text("héllo\n" * 1000, encoding="utf-8")
    large.write_bytes(b"x" * 10001)
    found = whole_logs([str(small), str(large), str(gone)], 10000)
    assert found[0] == "héllo\n" * 1000
    assert isinstance(found[1], Unread) and found[1].message == \
        f"its log {large} holds 10,001 bytes, over the 10,000 one rank may send (MLP_MAGIC_PULL_CAP)"
    assert isinstance(found[2], Unread) and found[2].message == \
        f"its log {gone} cannot be read: No such file or directory"


def test_a_log_of_exactly_the_cap_is_sent(tmp_path):
    log = tmp_path / "rank1.stdout"
    log.write_bytes(b"\xff" + b"y" * 99)   # what the rank wrote is UTF-8; a stray byte is replaced
    assert whole_logs([str(log)], 100) == ["\ufffd" + "y" * 99]
