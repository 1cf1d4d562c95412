"""cluster/gpu_feed: which agents are followed, and what their messages become (no network: the
agent's messages are handed in as agent/client would)."""
import pytest

from mlp_magic.cluster.gpu_feed import GpuFeed, _Done, agent_targets, live_gpus

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
