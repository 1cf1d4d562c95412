"""client/waiting: a cell's ranks stopped at breakpoints, as their iopub messages and the debugger's
replies tell it; the wait wakes on a stop, and a stale stop never counts."""
from concurrent.futures import Future

from mlp_magic.client.waiting import PAUSED, Requests


class World:
    """What Requests reads of a World: where waiters register, whether its processes ended."""

    def __init__(self):
        self.waiters = set()

    def wake_when_a_process_ends(self, waiter) -> None:
        self.waiters.add(waiter)

    def lifeline_ended(self) -> bool:
        return False


def requests(n: int = 3) -> tuple:
    futures = [[Future()] for _ in range(n)]
    return Requests(World(), list(range(n)), futures, track=False), futures


def test_the_wait_returns_once_every_running_rank_stopped():
    waiting, futures = requests()
    waiting._on_iopub(0, {"header": {"msg_type": PAUSED}, "content": {"stop": 1, "where": {"line": 3}}})
    assert not waiting.all_paused()
    futures[2][0].set_result(None)       # rank 2 finished
    waiting.stopped(1, {"stop": 1, "where": {"line": 3}})
    assert waiting.all_paused() and sorted(waiting.paused) == [0, 1]
    assert waiting.wait(until=None) is False   # woken by the stop, not done


def test_a_stop_older_than_the_last_move_on_is_stale():
    waiting, _ = requests(1)
    waiting.stopped(0, {"stop": 1})
    waiting.resumed([0])
    waiting.stopped(0, {"stop": 1})      # the first stop's message, arriving late
    assert waiting.paused == {} and not waiting.all_paused()
    waiting.stopped(0, {"stop": 2, "where": {"line": 9}})
    assert waiting.paused == {0: {"stop": 2, "where": {"line": 9}}}


def test_a_finished_rank_is_no_longer_paused_and_none_paused_is_not_all_paused():
    waiting, futures = requests(2)
    assert not waiting.all_paused()
    waiting.stopped(0, {"stop": 1})
    futures[0][0].set_result(None)
    assert waiting.paused == {}
    waiting.stopped(0, {"stop": 2})     # after its end: nothing to stop in
    assert waiting.paused == {}


def test_a_display_message_between_wakes_wakes_the_wait_when_its_time_is_up():
    """The last update before a quiet spell (a table's last step, then a long evaluation) is
    not left unseen until the next message: before, the wait slept on to its deadline."""
    import time

    from mlp_magic.client.waiting import DISPLAY_WAKES_EVERY_S

    futures = [[Future()]]
    seen = []
    waiting = Requests(World(), [0], futures, track=False, on_display=lambda *message: seen.append(message))
    waiting._display(0, "update_display_data", {"data": {}})
    assert waiting.wait(until=time.monotonic() + 5) is False     # the first wakes it at once
    began = time.monotonic()
    waiting._display(0, "update_display_data", {"data": {}})     # within the interval: no wake now
    assert waiting.wait(until=time.monotonic() + 5) is False
    took = time.monotonic() - began
    assert DISPLAY_WAKES_EVERY_S * 0.8 <= took < 2, took           # but when the interval was up
    assert len(seen) == 2
    began = time.monotonic()
    assert waiting.wait(until=time.monotonic() + 0.3) is False     # nothing new: the deadline
    assert time.monotonic() - began >= 0.29
