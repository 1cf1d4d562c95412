"""The agent's setup line (agent/__main__._setup): what it holds as JSON allows it (Infinity, NaN,
a pid of 0, a list for a text) is one "bad agent setup" error, never a rank the agent would
signal by a pid that names no process, or one it could not check (hypothesis)."""
from __future__ import annotations

import json

import pytest
from hypothesis import example, given

from mlp_magic.agent import __main__ as agent_main
from mlp_magic.core.proc_stat import process_id, start_time

from tests.unit.fuzz_checks import FUZZ, only_our_error
from tests.unit.hostile_json import dumps, hostile

SETUP = {"key": "ab" * 32, "bind": "127.0.0.1", "log_root": "/tmp/mlp-logs", "tls": None,
         "ranks": {"0": {"pid": 4242, "create_time": 1764000000.25, "pgid": 4242, "sid": 4000},
                   "1": {"pid": 4243, "create_time": 1764000000.5, "pgid": None, "sid": None}}}


def rank(**changes) -> dict:
    return dict(SETUP, ranks={"0": dict(SETUP["ranks"]["0"], **changes)})


@FUZZ
@given(hostile(SETUP))
@example(rank(create_time=float("nan")))   # accepted: NaN equals no start time, the check passed
@example(rank(pid=0))                      # accepted: os.kill(0, ...) signals the agent's own group
@example(rank(pid=float("inf")))           # OverflowError (found by hypothesis)
@example(rank(pid=1e308))                  # accepted as pid 10**308 (found by hypothesis)
@example(rank(pgid=-1))                    # accepted: a group the agent would end
@example(dict(SETUP, bind="\x00"))         # accepted; TypeError when the agent listens
def test_a_hostile_setup_is_one_error_or_ranks_the_agent_may_signal(setup):
    checked, message = only_our_error(agent_main._setup, dumps(setup).encode() + b"\n")
    if checked is None:
        assert message.startswith("bad agent setup on stdin")
        return
    for number, identity in checked["ranks"].items():
        assert type(number) is int and number >= 0
        assert process_id(identity["pid"]) == identity["pid"]
        assert start_time(identity["create_time"]) == identity["create_time"]
        assert all(process_id(identity[key]) == identity[key] for key in ("pgid", "sid") if key in identity)
    assert isinstance(checked["bind"], str) and "\0" not in checked["bind"]
    assert isinstance(checked["log_root"], str) and "\0" not in checked["log_root"]
    assert checked["key"]


def test_a_setup_nested_too_deeply_is_one_error():
    with pytest.raises(agent_main.MlpMagicError, match="bad agent setup"):
        agent_main._setup(b"[" * 5000 + b"]" * 5000 + b"\n")


@pytest.mark.parametrize("changes", [{"bind": "\x00"}, {"bind": "\ud800"},
                                     {"tls": {"cert": "\ud800", "key": "k"}}])
def test_an_agent_that_cannot_listen_says_so_in_its_one_line(monkeypatch, capsys, changes):
    """Its answer line is what the rank that starts it reads: an error there, not a traceback
    on stderr (before: TypeError, UnicodeEncodeError)."""
    line = json.dumps(dict(SETUP, **changes)).encode() + b"\n"
    monkeypatch.setattr(agent_main, "_setup_line", lambda: line)
    assert agent_main.serve() == 2
    [line] = capsys.readouterr().out.splitlines()
    assert list(json.loads(line)) == ["error"]
