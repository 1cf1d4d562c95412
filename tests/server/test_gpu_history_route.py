"""GET mlp-magic/gpus/history on a real jupyter_server, from a real agent replaying a real
capture (no GPU here): asked of the agent when no panel follows it, CSV or JSON, one host or all;
bad arguments are one clear error."""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from pathlib import Path

import psutil
import pytest
from tornado.httpclient import HTTPClientError

from mlp_magic import config
from mlp_magic.gpu.pure.history import CSV_HEADER
from mlp_magic.agent.rank import start as agent_start
from tests.timing import hang_bound
from tests import worlds


pytestmark = pytest.mark.timeout(120)
CAPTURE = Path(__file__).resolve().parents[1] / "fixtures/nvml/nccl-1550-h100-allgather-hang.txt"


def publish(state_dir, record: dict) -> None:
    path = state_dir / f"{record['id']}.json"
    path.with_suffix(".tmp").write_text(json.dumps(record))
    os.replace(path.with_suffix(".tmp"), path)


def world_record(pid: int, **extra) -> dict:
    ranks = [{"rank": 0, "host": "localhost", "state": "idle", "since": None, "last_output": None}]
    return {"id": "here-1-1", "pid": pid, "state": "running", "np": 1, "ranks": ranks, **extra}


@pytest.fixture
def agent(monkeypatch, tmp_path):
    """An agent started as a World's engine starts it (this process stands in for the engine).
    A World an earlier test left running in this process would publish its own record, with
    this process's pid, beside the test's: none may be there."""
    worlds.stop_world()
    monkeypatch.setenv(config.NVML_REPLAY, str(CAPTURE))
    key = secrets.token_hex(32)
    answer = agent_start.start_agent(key, "127.0.0.1", {}, str(tmp_path / "logs"))
    yield key, answer
    process = psutil.Process(answer["pid"])
    process.kill()
    process.wait(5)


async def test_the_history_of_an_unwatched_agent_as_csv_and_json(jp_fetch, world_state_dir, agent):
    key, answer = agent
    publish(world_state_dir, world_record(
        os.getpid(), agents={"localhost": {"addr": "127.0.0.1", "port": answer["port"]}},
        private={"agent_key": key}))
    await asyncio.sleep(2.5)   # two samples or more in the agent's own history
    reply = await jp_fetch("mlp-magic", "gpus", "history", params={"format": "csv"})
    lines = reply.body.decode().splitlines()
    assert lines[0] == CSV_HEADER and "attachment" in reply.headers["Content-Disposition"]
    rows = [line.split(",") for line in lines[1:]]
    assert len(rows) >= 8 and {row[1] for row in rows} == {"localhost"}
    first_gpu0 = next(row for row in rows if row[2] == "0")
    assert first_gpu0[3:6] == ["100", "75370", "38"]   # the capture's GPU 0: 100 %, 75370 MiB, 38 C

    reply = await jp_fetch("mlp-magic", "gpus", "history", params={"format": "json", "host": "localhost"})
    body = json.loads(reply.body)
    assert body["metrics"][:2] == ["util_pct", "mem_used_mib"] and list(body["hosts"]) == ["localhost"]
    assert body["hosts"]["localhost"]["gpus"] == 4 and len(body["hosts"]["localhost"]["samples"]) >= 2
    assert key not in reply.body.decode()


async def test_bad_arguments_are_one_clear_error(jp_fetch, world_state_dir):
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("mlp-magic", "gpus", "history", params={"format": "xml"})
    assert refused.value.code == 400 and b"csv or json" in refused.value.response.body
    with pytest.raises(HTTPClientError) as missing:
        await jp_fetch("mlp-magic", "gpus", "history", params={"host": "nowhere"})
    assert missing.value.code == 400 and b"no GPU history of host 'nowhere'" in missing.value.response.body
    assert b"Traceback" not in missing.value.response.body
    started = time.monotonic()
    reply = await jp_fetch("mlp-magic", "gpus", "history")
    assert json.loads(reply.body)["hosts"] == {} and time.monotonic() - started < hang_bound(0.5)


async def test_agents_that_refuse_or_stay_silent_give_no_history_and_no_hang(
        jp_fetch, world_state_dir, loopback_hosts):
    """A World whose agents are gone (connection refused) or hung (no answer): the route answers
    within its deadline with what it has, nothing, rather than wait on them."""
    agents = {"gone": {"addr": "127.0.0.3", "port": loopback_hosts.refusing_port},
              "hung": {"addr": "127.0.0.4", "port": loopback_hosts.silent_port}}
    publish(world_state_dir, world_record(os.getpid(), agents=agents, private={"agent_key": "ab" * 32}))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    reply = await jp_fetch("mlp-magic", "gpus", "history", params={"format": "csv"})
    # within the route's 3 s deadline (cluster/gpu_feed.histories_of), never a wait on the hung agent
    assert reply.body.decode() == CSV_HEADER + "\n" and time.monotonic() - started < hang_bound(3 + 0.5)
    with pytest.raises(HTTPClientError) as missing:
        await jp_fetch("mlp-magic", "gpus", "history", params={"host": "hung"})
    assert missing.value.code == 400 and b"(hosts with one: none)" in missing.value.response.body
