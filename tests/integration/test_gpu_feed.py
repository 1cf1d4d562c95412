"""Live GPUs (issue 23): a real 4-rank World starts its host's agent, which samples a fake NVML
replaying a real capture (tests/fixtures/nvml; no GPU here); the server's aggregator follows the
agent only while someone watches, puts the GPUs in the host's row and sends the samples once a
second; the agent dies with the World."""
import asyncio
import json
import time
from pathlib import Path

import psutil
import pytest

from mlp_magic import config
from mlp_magic.server.snapshot import panel_model
from mlp_magic.world import command

from .conftest import run

pytestmark = pytest.mark.timeout(240)
CAPTURE = Path(__file__).resolve().parents[1] / "fixtures/nvml/nccl-1550-h100-allgather-hang.txt"


@pytest.fixture
def replaying_world(ip, monkeypatch):
    run(ip, "%mpirun --stop")
    monkeypatch.setenv(config.NVML_REPLAY, str(CAPTURE))
    assert run(ip, "%%mpirun -np 4\npass") is None
    world = command.current_world()
    yield world
    run(ip, "%mpirun --stop")


async def watch(seconds: float, until) -> tuple:
    """A panel's view for up to ``seconds``: (the messages it got, the document as it watched,
    how many agents were followed meanwhile)."""
    live = panel_model()
    await live.start()
    messages = []
    unsubscribe = live.subscribe(lambda text: messages.append(json.loads(text)))
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not until(messages):
            await asyncio.sleep(0.05)
        followed, doc = len(live.gpu_feed._tasks), live.doc
    finally:
        unsubscribe()
        live.stop()
    return messages, doc, followed


def test_a_worlds_agent_feeds_the_panel_live_gpus(replaying_world):
    agents = replaying_world.agents
    assert list(agents) == [replaying_world.layout[0].host] and agents[replaying_world.layout[0].host]["port"]
    pid = next(iter(agents.values()))["pid"]
    assert psutil.pid_exists(pid)

    messages, doc, followed = asyncio.run(watch(10, lambda m: any(x["type"] == "gpus" for x in m)))
    assert followed == 1
    gpus = next(m for m in messages if m["type"] == "gpus")
    (host, rows), = gpus["hosts"].items()
    # the capture's first table: 4 H100s, 75370 MiB used and 100 % on GPU 0, 38 C, 152 W
    assert len(rows) == 4 and rows[0][:4] == [100, 75370, 38, 152.0]
    row = next(h for h in doc["hosts"] if h["name"] == host)
    assert row["live_gpus"]["source"] == "replay" and row["live_gpus"]["error"] is None
    assert [g["name"] for g in row["live_gpus"]["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 4
    assert row["live_gpus"]["gpus"][0]["memory_total_mib"] == 81559
    served = json.dumps(messages)
    assert replaying_world.agent_key not in served and "agent_key" not in served

    replaying_world.stop()
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not psutil.pid_exists(pid)


def test_nobody_watching_means_no_subscription(replaying_world):
    async def unwatched():
        live = panel_model()
        await live.start()
        await asyncio.sleep(1.5)
        try:
            return len(live.gpu_feed._tasks), live.gpu_latest
        finally:
            live.stop()

    assert asyncio.run(unwatched()) == (0, {})
