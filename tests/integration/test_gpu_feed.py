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
from mlp_magic.panel.snapshot import panel_model
from tests import worlds
from tests.timing import hang_bound, wait_until

from tests.integration.conftest import run

pytestmark = [pytest.mark.timeout(240), pytest.mark.alone]   # counts agents machine-wide
CAPTURE = Path(__file__).resolve().parents[1] / "fixtures/nvml/nccl-1550-h100-allgather-hang.txt"


@pytest.fixture
def replaying_world(ip, monkeypatch):
    run(ip, "%mpirun --stop")
    monkeypatch.setenv(config.NVML_REPLAY, str(CAPTURE))
    assert run(ip, "%%mpirun -np 4\npass") is None
    world = worlds.current_world()
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
    assert wait_until(lambda: not psutil.pid_exists(pid), hang_bound(1.0)), "the agent outlived its World"


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


def agent_pids() -> set:
    return {p.pid for p in psutil.process_iter(["cmdline"])
            if "mlp_magic.agent" in " ".join(p.info["cmdline"] or [])}


def _an_agent_that_cannot_start(host: str) -> None:
    """In the kernel: the host's agent started again by the World itself, as a new World does."""
    from mlp_magic.agent.launch import start_agents

    world = worlds.current_world()
    before, said = agent_pids(), []
    world.notice = said.append
    started = time.monotonic()
    agents, key = start_agents(world)
    assert time.monotonic() - started < hang_bound(2.0)   # the failed start is seen at once, not awaited
    assert list(agents) == [host], agents
    assert agents[host]["error"].startswith("the GPU agent did not start: "), agents
    assert said == [f"mlp_magic: no live GPU readings from {host}: {agents[host]['error']}"], said
    assert "\n" not in said[0] and "Traceback" not in said[0], said
    assert agent_pids() <= before   # the failed agent left nothing


def test_an_agent_that_cannot_start_is_one_line_and_the_world_goes_on(ip, replaying_world):
    world = replaying_world
    (host, entry), = world.agents.items()
    first = min(row.rank for row in world.layout if row.host == host)
    # The host's first engine: its agent stopped, and no Python starts from its environment any more.
    # (The chore's module is out of sys.modules, as are all of the host's chores: engine/bootstrap.)
    broken = run(ip, f"%%mpirun --ranks {first}\nimport os, sys\n"
                     "from mlp_magic.engine.bootstrap import AGENT_CHORE, _CHORES\n"
                     "held = [n for n in sys.modules if n.startswith(('mlp_magic.gpu', 'mlp_magic.core',"
                     " 'mlp_magic.agent.rank.start', 'mlp_magic.output.rank.retention'))]\n"
                     "assert held == [], held\n"
                     "agent = _CHORES[AGENT_CHORE][0].__globals__['_agent'].pop('process')\nagent.kill()\n"
                     "agent.wait()\nos.environ['PYTHONHOME'] = '/nonexistent'")
    assert broken is None and not psutil.pid_exists(entry["pid"])
    ip.call(_an_agent_that_cannot_start, host)
    assert run(ip, f"%%mpirun --ranks {first}\nos.environ.pop('PYTHONHOME')") is None
    assert run(ip, "%%mpirun\nprint(rank)") is None   # the World goes on


def test_a_broken_agent_is_shown_broken_and_its_last_readings_are_dropped(monkeypatch, tmp_path):
    """A real agent (this process standing in for its engine) followed, then killed: the host's
    live_gpus says why, its readings leave the "gpus" messages, and the feed keeps asking."""
    import secrets

    from mlp_magic.cluster.gpu_feed import GpuFeed
    from mlp_magic.agent.rank.start import start_agent

    monkeypatch.setenv(config.NVML_REPLAY, str(CAPTURE))
    key = secrets.token_hex(32)
    answer = start_agent(key, "127.0.0.1", {}, str(tmp_path))
    world = {"id": "w-1-1", "state": "running", "private": {"agent_key": key},
             "agents": {"here": {"addr": "127.0.0.1", "port": answer["port"]}}}

    async def follow() -> tuple:
        feed = GpuFeed(lambda: None)
        feed.follow([world], watched=True)
        try:
            deadline = time.monotonic() + hang_bound(1.0)   # the agent samples every second
            while "here" not in feed.latest and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            live = feed.latest.get("here")
            psutil.Process(answer["pid"]).kill()
            deadline = time.monotonic() + hang_bound(1.0)
            while "here" in feed.latest and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return live, dict(feed.latest), feed.hosts["here"], feed.samples_message()
        finally:
            feed.stop()

    live, latest, view, message = asyncio.run(follow())
    assert live is not None and live[1][0][:4] == [100, 75370, 38, 152.0]
    assert latest == {} and message is None
    assert view["error"].startswith("agent: ") and view["gpus"] == []
    psutil.Process(answer["pid"]).wait(5) if psutil.pid_exists(answer["pid"]) else None


def test_top_once_waits_for_the_worlds_agent_and_shows_its_gpus(replaying_world):
    """``mlp-magic top --once`` with a World up: the frame waits for the World's agent's first
    readings (it starts no agent of its own on the World's host), so the GPUs are in the frame."""
    import os
    import subprocess
    import sys

    host = replaying_world.layout[0].host
    top = [sys.executable, "-m", "mlp_magic.cli", "top", "-H", f"{host}:4", "--once"]
    env = dict(os.environ)
    env.pop(config.NVML_REPLAY, None)   # only the World's agent replays the capture
    done = subprocess.run(top, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    gpus = [line.split() for line in done.stdout.splitlines() if "GPU" in line and host in line]
    # the capture: GPU0 at 100 %, 75370 of 81559 MiB, 38 C, 152 W; four GPUs
    assert len(gpus) == 4 and gpus[0][1:] == ["GPU0", "100%", "73.6/80G", "38C", "152W"], done.stdout
