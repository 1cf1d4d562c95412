"""Parts under way on many hosts: finished by one deadline, every started part stopped when the
caller gives up (an error, or a Ctrl-C that came while they started)."""
from __future__ import annotations

import os
import signal
import time

import pytest

from mlp_magic.fanout.underway import Underway, finish_all, start_all


class Part:
    def __init__(self, answers=None, fails=None):
        self.answers, self.fails, self.stopped = answers or {}, fails, False

    def start(self) -> Underway:
        return Underway(self.finish, self.stop)

    def finish(self, deadline: float) -> dict:
        if self.fails:
            raise self.fails
        return self.answers

    def stop(self) -> None:
        self.stopped = True


def test_the_answers_of_every_part_are_merged():
    parts = [Part({"a": 1}), Part({"b": 2, "c": 3})]
    assert finish_all([p.start for p in parts], time.monotonic() + 1) == {"a": 1, "b": 2, "c": 3}
    assert not any(p.stopped for p in parts)


def test_a_failing_finish_stops_every_part():
    parts = [Part({"a": 1}), Part(fails=KeyboardInterrupt()), Part({"c": 3})]
    with pytest.raises(KeyboardInterrupt):
        finish_all([p.start for p in parts], time.monotonic() + 1)
    assert all(p.stopped for p in parts)


def test_a_failing_start_stops_the_parts_already_started():
    first, third = Part({"a": 1}), Part({"c": 3})

    def broken() -> Underway:
        raise OSError("cannot start ssh")
    with pytest.raises(OSError):
        start_all([first.start, broken, third.start])
    assert first.stopped and not third.stopped


def test_a_ctrl_c_while_parts_start_is_raised_once_all_started_and_stops_them():
    parts = [Part({"a": 1}), Part({"b": 2})]

    def ctrl_c_then_start() -> Underway:
        os.kill(os.getpid(), signal.SIGINT)   # deferred: the next part still starts
        return parts[1].start()
    with pytest.raises(KeyboardInterrupt):
        start_all([parts[0].start, ctrl_c_then_start])
    assert all(p.stopped for p in parts)


def test_an_empty_collect_is_empty():
    assert finish_all([], time.monotonic()) == {}


def test_a_wait_says_all_came_only_where_they_did():
    """A part that runs only when finished (the World's engines) cannot say its answers came:
    before, its wait said True at once, and a caller waiting on the fan-out went on without them."""
    from types import SimpleNamespace

    from mlp_magic.fanout.transports import Engines, Refused

    asked = []
    engines = Engines(lambda names, command, left, on_output: asked.append(names) or [])
    targets = [SimpleNamespace(name="worker1")]
    assert engines.start(targets, "true", timeout=5).wait(time.monotonic() + 5) is False
    assert asked == []   # waiting ran nothing: the engines run at the finish
    refused = Refused("no ssh client").start(targets, "true", timeout=5)
    assert refused.wait(time.monotonic()) is True and set(refused.so_far()) == {"worker1"}
    assert start_all([lambda: Underway(lambda deadline: {})]).wait(time.monotonic()) is False
