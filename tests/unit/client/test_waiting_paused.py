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
