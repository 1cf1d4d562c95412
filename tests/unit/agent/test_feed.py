"""The agent's sampling loop: subscribers before the sampler is open, a sampler that cannot be
opened or that fails on a tick, and samples kept in the history."""
from __future__ import annotations

import json
import threading
from pathlib import Path

from mlp_magic.agent.feed import Feed
from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu.replay import ReplayNvml, load_capture
from mlp_magic.gpu.sampler import GpuSampler

HANG = Path(__file__).resolve().parents[2] / "fixtures" / "nvml" / "nccl-1550-h100-allgather-hang.txt"


def replayed() -> GpuSampler:
    return GpuSampler(ReplayNvml(load_capture([str(HANG)]), sleep=lambda s: None), "replay")


def lines(subscriber) -> list:
    found = []
    while (line := subscriber.next_line(0)) is not None:
        found.append(json.loads(line))
    return found


def test_an_early_subscriber_gets_the_static_facts_once_the_sampler_is_open():
    feed = Feed(replayed, host="w3")
    early = feed.subscribe()
    assert lines(early) == [] and feed.tick() is None
    feed.open()
    feed.tick()
    static, history, sample = lines(early)
    assert (static["type"], static["host"], len(static["gpus"])) == ("static", "w3", 4)
    assert (history["type"], history["samples"]) == ("history", [])
    assert sample["type"] == "sample" and feed.history.latest()[1] == sample["gpus"]
    late = feed.subscribe()
    assert [m["type"] for m in lines(late)] == ["static", "history"] and len(lines(late)) == 0


def test_a_sampler_that_cannot_be_opened_is_the_static_error():
    def broken():
        raise MlpMagicError("NVML replay: cannot read /x: No such file or directory")
    feed = Feed(broken, host="w0")
    feed.open()
    assert feed.static == {"type": "static", "host": "w0", "source": "none", "driver": None, "gpus": [],
                           "error": "NVML replay: cannot read /x: No such file or directory"}


def test_the_loop_keeps_its_beat_when_a_tick_fails():
    feed = Feed(replayed)
    stop = threading.Event()
    calls = []

    def failing():
        calls.append(1)
        if len(calls) >= 3:
            stop.set()
        raise OSError("GPU lost")
    feed.open()
    feed.sampler.sample = failing
    feed.open = lambda: None
    feed.run(stop, tick_s=0.01)
    assert len(calls) == 3
