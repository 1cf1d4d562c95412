"""The agent's actions on this host: only its own ranks, still the same processes, get SIGINT;
only rank logs under the log root are read, links and all, at most 1 MiB from the end."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from hypothesis import example, given

from mlp_magic.agent.actions import (MAX_TAIL, interrupt_ranks, progress_ranks, start_time, tail_log,
                                     unblock_ranks)
from mlp_magic.agent.protocol import RequestError
from tests.timing import wait_until
from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import hostile


@pytest.fixture
def sleeper():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()
    child.wait()


def test_only_the_same_process_is_signalled(sleeper):
    started, state = start_time(sleeper.pid)
    sent = []
    ranks = {0: {"pid": sleeper.pid, "create_time": started},
             1: {"pid": sleeper.pid, "create_time": started - 30},     # the pid was reused since
             2: {"pid": 2 ** 22 + 1, "create_time": started}}          # gone
    answer = interrupt_ranks(ranks, kill=lambda pid, sig: sent.append((pid, sig)))
    assert answer == {"signalled": [0], "gone": [1, 2]} and sent == [(sleeper.pid, signal.SIGINT)]
    assert state not in (None, "Z", "X")    # alive: R, S, or D while it still loads from disk


def test_a_request_may_narrow_the_ranks_but_not_add_any(sleeper):
    started, _ = start_time(sleeper.pid)
    ranks = {0: {"pid": sleeper.pid, "create_time": started}, 1: {"pid": 1, "create_time": 0.0}}
    sent = []
    assert interrupt_ranks(ranks, [1], kill=lambda *a: sent.append(a)) == {"signalled": [], "gone": [1]}
    with pytest.raises(RequestError, match=r"ranks \[7\] are not on this host"):
        interrupt_ranks(ranks, [0, 7])
    for bad in ("0", [True], [0.5], {"0": 1}):
        with pytest.raises(RequestError, match="ranks"):
            interrupt_ranks(ranks, bad)
    assert sent == []


def test_a_start_time_that_is_not_a_number_signals_nothing():
    """NaN equals nothing: abs(started - NaN) > 0.5 is False, and the pid passed for unchanged."""
    sent = []
    ranks = {0: {"pid": os.getpid(), "create_time": float("nan")}}
    assert interrupt_ranks(ranks, kill=lambda *a: sent.append(a)) == {"signalled": [], "gone": [0]}
    assert sent == []


ME = {"pid": os.getpid(), "create_time": start_time(os.getpid())[0]}


@FUZZ
@given(hostile(ME))
@example({"pid": os.getpid(), "create_time": float("nan")})   # signalled: NaN compares False
@example({"pid": os.getpid(), "": ME["create_time"]})   # KeyError: its key renamed
@example({"create_time": ME["create_time"], "": os.getpid()})   # KeyError (found by hypothesis)
def test_a_rank_named_by_hostile_values_is_gone_and_never_signalled(identity):
    """The agent's ranks come from its setup line (JSON): whatever it holds, only this very
    process, as it was named, may be signalled (kill is recorded here, never sent)."""
    for act in (interrupt_ranks, unblock_ranks, progress_ranks):
        sent = []
        answer = act({0: identity}, kill=lambda *a: sent.append(a))
        assert sorted(answer["signalled"] + answer["gone"] + answer.get("deaf", [])) == [0]
        assert not sent or (identity == ME and [pid for pid, _ in sent] == [os.getpid()])


def test_a_real_sigint_reaches_the_process(sleeper):
    started, _ = start_time(sleeper.pid)
    assert interrupt_ranks({3: {"pid": sleeper.pid, "create_time": started}})["signalled"] == [3]
    assert sleeper.wait(10) != 0


def test_the_unblock_signal_reaches_only_a_process_that_catches_it(tmp_path):
    """A process without the unblock thread would die of the signal: it is named "deaf" and
    left alone; one with it (unblock/rank/side) gets it, and its thread wakes."""
    woke = tmp_path / "woke"
    program = ("import os, sys, time\nfrom mlp_magic.unblock.rank import side\n"
               "side.cut_gloo_connections = lambda: open(sys.argv[1], 'w').close() or {}\n"
               "assert side.install()\nprint('ready', flush=True)\ntime.sleep(60)")
    listening = subprocess.Popen([sys.executable, "-c", program, str(woke)], stdout=subprocess.PIPE,
                                 text=True)
    deaf = subprocess.Popen([sys.executable, "-c", "print('ready', flush=True); import time; time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert listening.stdout.readline() == deaf.stdout.readline() == "ready\n"
        ranks = {rank: {"pid": child.pid, "create_time": start_time(child.pid)[0]}
                 for rank, child in ((0, listening), (1, deaf))}
        assert unblock_ranks(ranks) == {"signalled": [0], "gone": [], "deaf": [1]}
        assert wait_until(woke.exists)
        assert listening.poll() is None and deaf.poll() is None   # both alive
    finally:
        for child in (listening, deaf):
            child.kill()
            child.wait()
            child.stdout.close()


@pytest.fixture
def logs(tmp_path):
    root = tmp_path / "logs"
    cell = root / "20261125-cell"
    cell.mkdir(parents=True)
    (cell / "rank0.stdout").write_bytes(b"hello\n" * 3)
    (cell / "rank1.stderr").write_bytes("é".encode() * 10)
    (tmp_path / "secret").write_text("private")
    os.symlink(tmp_path / "secret", cell / "rank2.stdout")
    os.symlink(tmp_path, root / "escape")
    return root, cell


def test_tail_reads_the_end_of_a_rank_log(logs):
    root, cell = logs
    assert tail_log(str(root), {"rank": 0, "log_dir": str(cell)}) == {"text": "hello\n" * 3, "size": 18,
                                                                      "truncated": False}
    end = tail_log(str(root), {"rank": 0, "log_dir": str(cell), "bytes": 4})
    assert end == {"text": "llo\n", "size": 18, "truncated": True}
    cut = tail_log(str(root), {"rank": 1, "stream": "stderr", "log_dir": str(cell), "bytes": 5})
    assert cut["text"] == "éé" and cut["truncated"]   # 5 bytes from the end: a half "é" is dropped


def test_tail_is_bounded(logs):
    root, cell = logs
    (cell / "rank3.stdout").write_bytes(b"x" * (MAX_TAIL + 100))
    answer = tail_log(str(root), {"rank": 3, "log_dir": str(cell), "bytes": 10 * MAX_TAIL})
    assert len(answer["text"]) == MAX_TAIL and answer["size"] == MAX_TAIL + 100


@pytest.mark.parametrize("request_, words", [
    ({"rank": 0, "log_dir": "/etc"}, "not under this agent's log root"),
    ({"rank": 0, "log_dir": "{root}/../"}, "not under"),
    ({"rank": 0, "log_dir": "{root}/escape"}, "not under"),           # a link out of the root
    ({"rank": 2, "log_dir": "{cell}"}, "a link, refused"),            # a log that is a link
    ({"rank": 9, "log_dir": "{cell}"}, "no such log"),
    ({"rank": 0, "log_dir": "{root}/nothing"}, "no such log folder"),
    ({"rank": -1, "log_dir": "{cell}"}, "rank"), ({"rank": "0", "log_dir": "{cell}"}, "rank"),
    ({"rank": 0, "stream": "stdin", "log_dir": "{cell}"}, "stream"),
    ({"rank": 0, "bytes": 0, "log_dir": "{cell}"}, "bytes"), ({"rank": 0}, "log_dir"),
    ({"rank": 0, "log_dir": "{cell}\0"}, "log_dir"),
    ({"rank": 0, "log_dir": "{cell}\ud800"}, "log_dir"),   # JSON's "\\ud800": no path holds it
])
def test_tail_refuses_what_is_not_a_rank_log_under_the_root(logs, request_, words):
    root, cell = logs
    request = {k: v.format(root=root, cell=cell) if isinstance(v, str) else v for k, v in request_.items()}
    with pytest.raises(RequestError, match=words):
        tail_log(str(root), request)
