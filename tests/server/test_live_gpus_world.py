"""Live GPUs end to end (issue 23): a real 4-rank World (real mpiexec and ipyparallel engines, in
the session's Jupyter kernel) starts its host's agent through its first engine; the agent replays a
real capture (tests/fixtures/nvml; no GPU here). A real jupyter_server's live socket follows it
once a panel opens: the agent's history, the host's live_gpus, then the samples; the key never
leaves the record's private part; the agent ends with the World."""
from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from pathlib import Path

import psutil
import pytest

from mlp_magic import config
from mlp_magic.cluster.pure.delta import apply
from tests import worlds
from tests.timing import hang_bound

pytestmark = pytest.mark.timeout(240)
CAPTURE = Path(__file__).resolve().parents[1] / "fixtures/nvml/nccl-1550-h100-allgather-hang.txt"
# The capture's GPU 0 (utilisation %, MiB used, C, W): a rank hung in an NCCL all-gather.
GPU0 = [100, 75370, 38, 152.0]


def run(ip, cell: str):
    return ip.run_cell(cell).error_in_exec


@pytest.fixture
def jp_server_config(tmp_path, world_state_dir):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=4\n")
    return {"ServerApp": {"jpserver_extensions": {"mlp_magic.panel": True}},
            "MlpMagicPanel": {"hostfile": str(hostfile), "probe_timeout": 0.5}}


@pytest.fixture
def replaying_world(ip, world_state_dir, monkeypatch):
    """A World whose agent replays the capture (the engines inherit the variable)."""
    run(ip, "%mpirun --stop")
    monkeypatch.setenv(config.NVML_REPLAY, str(CAPTURE))
    assert run(ip, "%%mpirun -np 4\npass") is None
    yield worlds.current_world()
    run(ip, "%mpirun --stop")


async def messages_until(ws, done, seconds: float) -> list:
    """What the socket sent until ``done(messages)`` or ``seconds`` passed."""
    seen, deadline = [], time.monotonic() + seconds
    while not done(seen) and time.monotonic() < deadline:
        try:
            text = await asyncio.wait_for(ws.read_message(), deadline - time.monotonic())
        except asyncio.TimeoutError:
            break
        assert text is not None, "the server closed the websocket"
        seen.append((time.monotonic(), json.loads(text)))
    return seen


def the_record(world_state_dir) -> tuple:
    (path,) = [p for p in world_state_dir.iterdir() if p.suffix == ".json"]
    return path, path.read_text()


async def test_the_worlds_agent_feeds_the_panels_socket_and_ends_with_the_world(
        ip, replaying_world, jp_ws_fetch, world_state_dir):
    host = replaying_world.layout[0].host
    path, text = the_record(world_state_dir)
    record, key = json.loads(text), replaying_world.agent_key
    assert set(record["agents"]) == {host} and record["agents"][host]["addr"] == "127.0.0.1"
    pid = record["agents"][host]["pid"]
    assert "mlp_magic.agent" in " ".join(psutil.Process(pid).cmdline())
    # the key: in the private part only, in a file only its owner reads, in a folder only its owner opens
    assert len(key) == 64 and record["private"]["agent_key"] == key and text.count(key) == 1
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(world_state_dir).st_mode) == 0o700

    ws = await jp_ws_fetch("mlp-magic", "live")
    # the agent samples every second: how soon the first reach the panel is benchmarks/live_load.py's
    seen = await messages_until(ws, lambda s: any(m["type"] == "gpus" for _, m in s), hang_bound(1.0))
    kinds = [m["type"] for _, m in seen]
    assert kinds[0] == "snapshot" and "gpus" in kinds, kinds
    gpus = next(m for _, m in seen if m["type"] == "gpus")
    assert len(gpus["hosts"][host]) == 4 and gpus["hosts"][host][0][:4] == GPU0
    assert "seq" not in gpus   # the samples change no document: outside the sequence
    # the panel whose opening made the server follow the agent gets the agent's history too
    histories = [m for _, m in seen if m["type"] == "gpu_history"]
    assert histories and kinds.index("gpu_history") < kinds.index("gpus"), kinds
    assert histories[0]["step_s"] == 10 and len(histories[0]["hosts"][host]["util"]) == 4

    doc = seen[0][1]["doc"]
    for _, message in seen[1:]:
        if message["type"] == "patch":
            doc = apply(doc, message["ops"])
    live = next(h for h in doc["hosts"] if h["name"] == host)["live_gpus"]
    assert live["source"] == "replay" and live["error"] is None
    assert live["gpus"][0] == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
                               "power_limit_w": 700.0}
    assert key not in json.dumps([m for _, m in seen]) and "agent_key" not in json.dumps([m for _, m in seen])
    ws.close()

    assert run(ip, "%mpirun --stop") is None
    deadline = time.monotonic() + hang_bound(1.0)   # it ends with the World, at once
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not psutil.pid_exists(pid), "the agent outlived its World"
