"""The one helper that runs a blocking call in the background and waits no longer than a deadline."""
from __future__ import annotations

import threading
import time

from mlp_magic.machine.deadline import in_background, until, within


def test_a_value_in_time_a_default_when_late_or_failed():
    assert within(5, lambda: 42) == 42
    release = threading.Event()
    started = time.monotonic()
    assert within(0.2, lambda: release.wait(30) or "late", default="gone") == "gone"
    assert time.monotonic() - started < 2   # the caller did not wait for the work
    release.set()

    def fails():
        raise OSError("driver wedged")
    pending = in_background(fails)
    assert pending.result(time.monotonic() + 5, default="none") == "none"
    assert isinstance(pending.error, OSError)


def test_several_run_at_once_against_one_deadline():
    started = time.monotonic()
    pendings = [in_background(lambda n=n: time.sleep(0.3) or n) for n in range(5)]
    deadline = time.monotonic() + 5
    assert [p.result(deadline) for p in pendings] == list(range(5))
    assert time.monotonic() - started < 1.2   # overlapping, not one after another
    assert all(p.wait(deadline) for p in pendings)


def test_a_ctrl_c_during_the_wait_leaves_the_work_running_and_waitable():
    """A Ctrl-C interrupting the wait must not make unfinished work look finished: the caller
    then stops it and waits for that (a CPython 3.11 Thread.join interrupted so would report the
    thread as ended, and the command exited with its ssh clients still running)."""
    import os
    import signal

    release = threading.Event()
    pending = in_background(lambda: "done" if release.wait(30) else "late")
    ctrl_c = threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT))
    ctrl_c.start()
    try:
        pending.wait(time.monotonic() + 10)
        raise AssertionError("the Ctrl-C did not reach the wait")
    except KeyboardInterrupt:
        pass
    finally:
        ctrl_c.cancel()
    assert pending.wait(time.monotonic() + 0.2) is False   # still running
    release.set()
    assert pending.result(time.monotonic() + 5) == "done"


def test_until_asks_at_once_then_less_and_less_often_and_never_past_the_deadline():
    asked = []

    def ready():
        asked.append(time.monotonic())
        return len(asked) >= 6 and "yes"
    started = time.monotonic()
    assert until(ready, started + 5, first_s=0.01, longest_s=0.04) == "yes"
    pauses = [b - a for a, b in zip(asked, asked[1:])]
    assert asked[0] - started < 0.01                       # at once
    assert pauses[0] < pauses[2] and min(pauses) >= 0.009   # growing from first_s
    assert max(pauses) < 0.5                                 # capped (0.04, plus a busy machine)

    started = time.monotonic()
    assert until(lambda: 0, started + 0.2, first_s=0.05, longest_s=10) == 0   # its last value
    assert 0.19 < time.monotonic() - started < 1.0           # cut at the deadline, not at 10 s
    assert until(lambda: [], time.monotonic() - 1) == []     # past already: asked once


async def _thread_of(value):
    import asyncio
    import threading

    await asyncio.sleep(0)
    if value == "fail":
        raise ValueError("the coroutine's own error")
    return value, threading.current_thread().name


def test_run_to_end_runs_a_coroutine_inside_a_running_loop_as_a_kernels_cell_does():
    """A Jupyter kernel runs every cell inside its running loop, where asyncio.run refuses (issue
    43: a World across hosts failed at once in every kernel)."""
    import asyncio

    from mlp_magic.machine.deadline import run_to_end

    async def a_cell():
        return run_to_end(lambda: _thread_of(7), "mlp-test-loop")

    assert asyncio.run(a_cell()) == (7, "mlp-test-loop")   # in a thread of its own

    async def a_failing_cell():
        return run_to_end(lambda: _thread_of("fail"))

    try:
        asyncio.run(a_failing_cell())
    except ValueError as error:
        assert str(error) == "the coroutine's own error"   # raised here, as it is
    else:
        raise AssertionError("the coroutine's error was lost")


def test_run_to_end_runs_on_this_thread_where_no_loop_runs():
    import threading

    from mlp_magic.machine.deadline import run_to_end

    assert run_to_end(lambda: _thread_of(1)) == (1, threading.current_thread().name)
