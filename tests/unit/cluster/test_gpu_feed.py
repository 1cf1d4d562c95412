"""cluster/gpu_feed: which agents are followed, and what their messages become (no network: the
agent's messages are handed in as agent/client would)."""
import json
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mlp_magic.cluster.gpu_feed import GpuFeed, _Done, agent_targets, live_gpus
from mlp_magic.gpu.pure.history import METRICS, history_csv, history_json
from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import dumps, hostile, replaced

STATIC = {"type": "static", "host": "w0", "source": "replay", "error": None, "driver": "550.54",
          "gpus": [{"index": 0, "name": "H100", "memory_total_mib": 81559, "power_limit_w": 700.0,
                    "pci_bus_id": "00000000:04:00.0"},
                   {"index": 1, "name": "H100", "memory_total_mib": 81559, "power_limit_w": 700.0,
                    "pci_bus_id": "00000000:23:00.0"}]}


def world(world_id="w-1-1", state="running", key="k" * 64, agents=None):
    return {"id": world_id, "state": state, "private": {"agent_key": key},
            "agents": agents if agents is not None else {"w0": {"addr": "10.0.0.1", "port": 4000},
                                                         "w1": {"error": "no python"}}}


def test_only_running_worlds_agents_that_started_with_a_key_are_followed():
    assert agent_targets([world()]) == {("w-1-1", "w0"): ("10.0.0.1", 4000, "k" * 64)}
    assert agent_targets([world(state="stopped"), world(key=None), {"id": "old"}]) == {}


def test_static_facts_become_the_hosts_live_gpus_and_processes_follow_the_samples():
    changes = []
    feed = GpuFeed(lambda: changes.append(1))
    feed._take("w0", STATIC)
    assert feed.hosts["w0"] == {"source": "replay", "error": None, "processes": [],
                                "gpus": [{"index": 0, "name": "H100", "memory_total_mib": 81559,
                                          "power_limit_w": 700.0},
                                         {"index": 1, "name": "H100", "memory_total_mib": 81559,
                                          "power_limit_w": 700.0}]}
    sample = {"type": "sample", "t": 100.0, "processes": [[0, 3, 4242, 61000]],
              "gpus": [[97, 61230, 60, 410.5, 0, 0, 0], [3, 1024, 35, 80.0, 0, 0, 0]]}
    feed._take("w0", sample)
    assert feed.hosts["w0"]["processes"] == [[0, 3, 4242, 61000]] and len(changes) == 2
    feed._take("w0", dict(sample, t=101.0))    # same processes: no change of the document
    assert len(changes) == 2 and feed.sample_count == 2
    assert feed.samples_message() == {"t": 101.0, "hosts": {"w0": sample["gpus"]}}
    history = feed.history_message(now=105.0, seconds=10, step_s=5)
    assert history["t0"] == 95.0 and history["hosts"]["w0"]["util"] == [[None, 97.0], [None, 3.0]]


def test_a_host_without_gpus_is_told_once_and_not_followed_further():
    feed = GpuFeed(lambda: None)
    with pytest.raises(_Done):
        feed._take("w2", {"type": "static", "source": "none", "error": "no GPUs", "gpus": []})
    assert feed.hosts["w2"] == live_gpus({"source": "none", "error": "no GPUs"}, [])
    assert feed.samples_message() is None


def test_an_agents_history_of_another_shape_is_left_and_the_samples_still_count():
    feed = GpuFeed(lambda: None)
    feed._take("w0", STATIC)
    feed._take("w0", {"type": "history", "gpus": 2, "metrics": ["other"], "samples": []})
    feed._take("w0", {"type": "sample", "t": 1.0, "gpus": [[1] * 7, [2] * 7], "processes": []})
    assert len(feed.histories["w0"]) == 1


# ---------------------------------------------------------------- any stream of messages (hypothesis)
PROCESSES = st.lists(st.tuples(st.integers(0, 1), st.none() | st.integers(0, 7), st.integers(1, 99),
                               st.integers(0, 81559)).map(list), max_size=3)
READINGS = st.lists(st.none() | st.integers(0, 100), min_size=7, max_size=7)
SAMPLE_ROWS = st.lists(READINGS, min_size=2, max_size=2)


@given(st.lists(st.tuples(SAMPLE_ROWS, PROCESSES), max_size=20))
def test_the_document_changes_only_when_the_processes_do(samples):
    """Whatever the samples, live_gpus changes (a patch) once for the static facts and then only
    when the processes differ from the last ones; the samples all reach the buffer and the
    newest is the one the next "gpus" message carries."""
    changes = []
    feed = GpuFeed(lambda: changes.append(1))
    feed._take("w0", STATIC)
    shown, expected_changes = [], 1
    for t, (rows, processes) in enumerate(samples):
        feed._take("w0", {"type": "sample", "t": float(t), "gpus": rows, "processes": processes})
        expected_changes += processes != shown
        shown = processes
    assert len(changes) == expected_changes and feed.hosts["w0"]["processes"] == shown
    assert len(feed.histories["w0"]) == len(samples) and feed.sample_count == len(samples)
    if samples:
        assert feed.samples_message() == {"t": float(len(samples) - 1), "hosts": {"w0": samples[-1][0]}}


@given(st.lists(st.tuples(st.sampled_from(["w0", "w1", "w2"]), st.floats(0, 1000)), max_size=12))
def test_the_gpus_message_holds_each_hosts_newest_sample_at_the_newest_time(samples):
    feed = GpuFeed(lambda: None)
    newest = {}
    for host, t in samples:
        rows = [[int(t) % 101] * 7]
        feed._take(host, {"type": "sample", "t": t, "gpus": rows, "processes": []})
        newest[host] = (t, rows)
    message = feed.samples_message()
    if not samples:
        assert message is None
    else:
        assert message["hosts"] == {host: rows for host, (_, rows) in newest.items()}
        assert message["t"] == max(t for t, _ in newest.values())


def test_an_agents_history_seeds_the_buffer_the_latest_reading_when_fresh_and_is_handed_on():
    came = []
    feed = GpuFeed(lambda: None, came.append)
    feed._take("w0", STATIC)
    now = time.time()
    rows = [[50, 1000, 40, 100.0, 0, 0, 0], [60, 2000, 41, 110.0, 0, 0, 0]]
    history = {"type": "history", "gpus": 2, "length": 600, "samples": [[now - 1.0, rows], [now - 0.5, rows]]}
    feed._take("w0", history)
    assert came == ["w0"] and len(feed.histories["w0"]) == 2
    assert feed.latest["w0"] == (now - 0.5, rows) and feed.sample_count == 1   # sent with the next tick
    assert feed.sampled == set()   # a history holds no processes: top --once waits for a sample
    feed._take("w0", {"type": "sample", "t": now, "gpus": rows, "processes": [[0, 1, 702, 2048]]})
    assert feed.sampled == {"w0"} and feed.hosts["w0"]["processes"] == [[0, 1, 702, 2048]]
    assert list(feed.history_message(now, only="w0")["hosts"]) == ["w0"]
    assert feed.history_message(now, only="w9")["hosts"] == {}

    stale = GpuFeed(lambda: None)   # an agent whose sampler has been stuck: its history is not "now"
    stale._take("w1", dict(history, samples=[[now - 60.0, rows]]))
    assert stale.latest == {} and stale.sample_count == 0 and len(stale.histories["w1"]) == 1


def test_a_waiter_wakes_when_an_agent_says_anything_and_not_before():
    """``heard``: what top --once waits on for every agent's first readings (no polling)."""
    import asyncio

    async def scenario() -> list:
        feed = GpuFeed(lambda: None)
        woken = []
        loop = asyncio.get_running_loop()
        sample = {"type": "sample", "t": 1.0, "processes": [], "gpus": [[1, 2, 3, 4.0, 0, 0, 0]] * 2}
        loop.call_later(0.05, feed._take, "w0", STATIC)
        woken.append(await feed.heard(30))                  # the static facts
        loop.call_later(0.05, feed._take, "w0", sample)
        woken.append(await feed.heard(30))                  # a sample that changes no document
        loop.call_later(0.05, feed._set_host, "w1", live_gpus({"error": "agent: gone"}, []))
        woken.append(await feed.heard(30))                  # an error
        began = time.monotonic()
        woken.append(await feed.heard(0.2))                 # silence: False after the timeout
        woken.append(time.monotonic() - began >= 0.2)
        return woken

    assert asyncio.run(scenario()) == [True, True, True, False, True]


# ---------------------------------------------------------------- hostile agents and records (hypothesis)
HISTORY = {"type": "history", "gpus": 2, "length": 600, "metrics": list(METRICS),
           "samples": [[1767225600.0, [[50, 1000, 40, 100.0, 0, 0, 0], [60, 2000, 41, 110.0, 0, 0, 0]]]]}
SAMPLE = {"type": "sample", "t": 1767225601.0, "processes": [[0, 3, 4242, 61000]],
          "gpus": [[97, 61230, 60, 410.5, 0, 0, 0], [3, 1024, 35, 80.0, 0, 0, 0]]}


@FUZZ
@given(hostile(STATIC), hostile(HISTORY), hostile(SAMPLE))
@example(STATIC, replaced(HISTORY, ("gpus",), 2 ** 31), SAMPLE)   # old code: MemoryError (10**6: gigabytes)
@example(STATIC, HISTORY, replaced(SAMPLE, ("processes",), [None]))   # old code: TypeError ends the task
@example(STATIC, HISTORY, replaced(SAMPLE, ("t",), float("inf")))   # old code: iso_time(inf) in the CSV
@example(replaced(STATIC, ("gpus",), {"": None}), HISTORY, SAMPLE)   # old code: AttributeError
def test_a_hostile_agent_stream_costs_its_bad_messages_only(static, history, sample):
    """An agent of another version (or not ours) says what JSON allows: each message is taken or
    left, nothing else escapes (an exception ends the host's subscription for good), and what
    the panel is served (the document's host row, "gpus" and history messages, the exports)
    stays strict JSON."""
    feed = GpuFeed(lambda: None)
    for message in (static, history, sample, dict(SAMPLE, t=1767225602.0)):
        message = json.loads(dumps(message))
        try:
            feed._take("w0", message)
        except _Done:
            pass
    json.dumps([feed.hosts, feed.samples_message(), feed.history_message(1767225610.0)], allow_nan=False)
    json.dumps(history_json(feed.histories), allow_nan=False)
    assert history_csv(feed.histories).startswith("time,")


@FUZZ
@given(hostile(world()))
@example(replaced(world(), ("agents", "w0", "port"), float("inf")))   # old code: OverflowError
@example(replaced(world(), ("agents", "w0", "port"), 2 ** 63))   # kept: OverflowError in getaddrinfo
@example(replaced(world(), ("id",), []))   # old code: TypeError (a list as the task's key)
@example(replaced(world(), ("private",), [None]))   # old code: AttributeError
def test_a_hostile_world_record_names_valid_agents_only(doc):
    targets = agent_targets([json.loads(dumps(doc))])
    for (world_id, host), (addr, port, key) in targets.items():
        assert isinstance(addr, str) and isinstance(port, int) and 0 < port < 65536 and key
