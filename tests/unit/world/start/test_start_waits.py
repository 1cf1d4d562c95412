"""The start's and the stop's waits are woken by events, not by a clock: engines registering (the
client's registration callbacks), a process of the World ending (the lifeline, pid file
descriptors). The real thing: tests/integration/test_start.py, test_start_failures.py."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from mlp_magic.world.pure.budget import StartBudget
from mlp_magic.errors import MlpMagicError
from mlp_magic.client.ipp_private import on_registration
from mlp_magic.world.lifeline import wait_for_ends
from mlp_magic.world.start.registration import Waiting, wait_for_engines


class FakeClient:
    """What the wait reads of ipyparallel's client: its ids, its registration callbacks."""

    def __init__(self, events: bool = True):
        self.ids: list = []
        if events:
            self._registration_callbacks: list = []

    def register(self, engine_id: int) -> None:   # as the client's IO thread does
        self.ids = [*self.ids, engine_id]
        for callback in list(getattr(self, "_registration_callbacks", [])):
            callback({"event": "register", "id": engine_id})


class Alive:
    name = "mpiexec"
    popen = None

    def __init__(self):
        self.alive = True

    def running(self) -> bool:
        return self.alive


def waiting_for(np: int, processes=None) -> Waiting:
    return Waiting(["h"] * np, processes or [Alive(), Alive()], lambda: "", [], "/w")


def budget(stall: float = 30, total: float = 60) -> StartBudget:
    return StartBudget(stall_s=stall, total_s=total)


def register_later(client: FakeClient, ids: list, every: float) -> threading.Thread:
    def run():
        for engine_id in ids:
            time.sleep(every)
            client.register(engine_id)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_the_start_wakes_once_per_registration_and_returns_at_the_last():
    client, waiting = FakeClient(), waiting_for(4)
    register_later(client, [0, 1, 2, 3], every=0.15)
    started = time.monotonic()
    wait_for_engines(client, waiting, budget(), lambda line, registered, np: None)
    assert time.monotonic() - started < 3
    assert waiting.wakes <= 4 + 2   # one per engine (a clock of 50 ms would have woken ~12 times)
    assert client._registration_callbacks == []   # nothing of ours left on the client


def test_the_progress_display_is_woken_when_due_and_the_stall_deadline_still_holds():
    client, waiting = FakeClient(), waiting_for(2)
    shown = []

    class Progress:
        due = time.monotonic() + 0.2

        def __call__(self, line, registered, np):
            shown.append(line)

        def wake_at(self):
            return self.due if len(shown) < 2 else float("inf")

    client.register(0)
    started = time.monotonic()
    with pytest.raises(MlpMagicError, match="no new rank for 1 s"):
        wait_for_engines(client, waiting, budget(stall=1), Progress())
    assert 0.9 < time.monotonic() - started < 3
    assert len(shown) >= 2 and waiting.wakes <= 6


def test_a_process_that_ends_wakes_the_start_at_once():
    client, processes = FakeClient(), [Alive(), Alive()]
    waiting = waiting_for(2, processes)
    processes[1].popen = type("P", (), {"returncode": 1})()

    def end():
        time.sleep(0.2)
        processes[1].alive = False
        waiting.wake()   # what the World's lifeline does
    threading.Thread(target=end, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(MlpMagicError, match="mpiexec exited with status 1"):
        wait_for_engines(client, waiting, budget(), lambda *a: None)
    assert time.monotonic() - started < 2 and waiting.wakes <= 2


def test_a_client_without_registration_events_is_asked_on_a_clock():
    client, waiting = FakeClient(events=False), waiting_for(2)
    assert on_registration(client, lambda: None) is None
    register_later(client, [0, 1], every=0.1)
    wait_for_engines(client, waiting, budget(), lambda *a: None)
    assert waiting.wakes >= 3   # the fallback clock did the waking


def test_the_stop_waits_for_the_processes_ends_and_no_longer():
    class Child:
        def __init__(self, seconds):
            self.popen = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
            self.pid = self.popen.pid

        def running(self):
            return self.popen.poll() is None

    quick = [Child(0.2), Child(0.3)]
    started = time.monotonic()
    assert wait_for_ends(quick, 10) is True
    assert time.monotonic() - started < 5
    slow = Child(30)
    started = time.monotonic()
    assert wait_for_ends([slow], 0.3) is False
    assert 0.25 < time.monotonic() - started < 3
    slow.popen.kill()
    slow.popen.wait()
    assert wait_for_ends([slow], 0) is True   # ended already: nothing to wait for
