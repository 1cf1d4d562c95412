"""A rank's sampler (profile/rank/sampler): a real py-spy records this process, and stops with
what it recorded; a host without py-spy, or one where it may not attach, is one line."""
import os
import time
from unittest import mock

from mlp_magic.profile.rank import sampler


def _busy(seconds: float) -> int:
    total, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        total += 1
    return total


def test_py_spy_records_this_process_until_told_to_stop(tmp_path, monkeypatch):
    monkeypatch.setenv("MLP_MAGIC_HOME", str(tmp_path))
    started = sampler.start("t1", 200, False)
    assert "pid" in started, started
    _busy(0.5)
    answer = sampler.stop("t1")
    assert "error" not in answer, answer
    assert "MainThread" in answer["raw"] and "_busy (" in answer["raw"], answer["raw"][:2000]
    assert answer["entered"] == []   # no process group here
    assert not any(tmp_path.rglob("t1-*")), list(tmp_path.rglob("*"))   # its files are gone
    assert sampler.stop("t1") == {"error": "not sampled: py-spy was not running in this rank"}


def test_no_py_spy_and_a_refused_attach_are_each_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("MLP_MAGIC_HOME", str(tmp_path))
    with mock.patch.object(sampler, "find_pyspy", return_value=None):
        assert sampler.start("t2", 100, False) == {
            "error": f"no py-spy on this host: {sampler.NO_PYSPY_FIX}"}
    refusing = tmp_path / "py-spy"
    refusing.write_text("#!/bin/sh\necho 'Error: Operation not permitted (os error 1)' >&2\nexit 1\n")
    refusing.chmod(0o755)
    answer = sampler.start("t3", 100, False, str(refusing))
    assert answer["error"].startswith("py-spy could not sample this rank: Operation not permitted"), answer
    assert answer["error"].endswith(sampler.PTRACE_FIX)
    assert sampler._RUNNING == {}


def test_a_sampler_left_by_a_cell_whose_stop_never_came_ends_with_the_next_start(tmp_path, monkeypatch):
    monkeypatch.setenv("MLP_MAGIC_HOME", str(tmp_path))
    first = sampler.start("t4", 100, False)["pid"]
    second = sampler.start("t5", 100, False)["pid"]
    try:
        assert list(sampler._RUNNING) == ["t5"]
        assert not os.path.exists(f"/proc/{first}") or "Z" in open(f"/proc/{first}/stat").read().split()[2]
    finally:
        sampler.stop_all()
    assert not os.path.exists(f"/proc/{second}")


def _engine_shell():
    from IPython.core.events import EventManager, available_events

    return type("Shell", (), {"events": EventManager(object(), available_events)})()


def test_the_cells_end_stops_py_spy_and_a_stop_before_it_leaves_no_hook(tmp_path, monkeypatch):
    monkeypatch.setenv("MLP_MAGIC_HOME", str(tmp_path))
    shell = _engine_shell()
    hooks = shell.events.callbacks["post_run_cell"]
    with mock.patch.object(sampler, "running_engine_shell", return_value=shell):
        sampler.start("t6", 100, False)
        assert len(hooks) == 1
        _busy(0.2)
        shell.events.trigger("post_run_cell", None)   # the cell ended: py-spy writes and exits
        assert hooks == [] and sampler._RUNNING["t6"].told
        assert "_busy (" in sampler.stop("t6")["raw"]
        sampler.start("t7", 100, False)   # a profile refused on another rank: stopped before its cell
        assert len(hooks) == 1
        sampler.stop("t7")
        assert hooks == []   # the next cell does not reach a sampler that is gone
