"""The agent's TCP server in this process (its feed driven by hand, on a replayed capture) and its
asyncio client: the key, the ops, and clients that send garbage, too much, or nothing."""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given

from mlp_magic.agent import server as server_module
from mlp_magic.agent.client import AgentError, _line, call, subscribe
from mlp_magic.agent.feed import QUEUE_LINES, Feed, Subscriber
from mlp_magic.agent.protocol import (LINE_LIMIT, RequestError, auth_digest, authentic, decode_request,
                                      encode, key_bytes)
from mlp_magic.agent.server import AgentServer, listening_socket
from mlp_magic.gpu.replay import ReplayNvml, load_capture
from mlp_magic.gpu.sampler import GpuSampler
from tests.unit.fuzz_checks import FUZZ, only_our_error
from tests.unit.hostile_json import dumps, hostile

HANG = Path(__file__).resolve().parents[2] / "fixtures" / "nvml" / "nccl-1550-h100-allgather-hang.txt"
KEY = secrets.token_hex(32)


@pytest.fixture
def agent(tmp_path):
    nvml = ReplayNvml(load_capture([str(HANG)]), sleep=lambda s: None)
    feed = Feed(lambda: GpuSampler(nvml, "replay"), host="w0", history_length=5)
    feed.open()
    listener = listening_socket("127.0.0.1")
    served = AgentServer(listener, feed, key_bytes(KEY), {}, str(tmp_path))
    threading.Thread(target=served.serve_forever, daemon=True).start()
    yield served
    listener.close()


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


def raw_exchange(port: int, payload: bytes, authenticate: bool = True) -> dict | None:
    """Send ``payload`` after the greeting (with a good auth digest spliced in where it says AUTH)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        reader = connection.makefile("rb")
        nonce = json.loads(reader.readline())["nonce"]
        connection.sendall(payload.replace(b"AUTH", auth_digest(key_bytes(KEY), nonce).encode()))
        line = reader.readline()
        return json.loads(line) if line else None


def test_subscribers_get_the_static_facts_the_history_and_each_sample(agent):
    agent.feed.tick()
    messages = []

    async def listen():
        task = asyncio.ensure_future(subscribe("127.0.0.1", agent.port, KEY, messages.append, timeout=5))
        while len(messages) < 2:
            await asyncio.sleep(0.01)
        agent.feed.tick()
        while len(messages) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
    run(listen())
    static, history, sample = messages
    assert (static["type"], static["host"], static["source"]) == ("static", "w0", "replay")
    assert len(static["gpus"]) == 4
    assert history["type"] == "history" and len(history["samples"]) == 1
    assert sample["type"] == "sample" and sample["gpus"][0] == [100, 75370, 38, 152.0, None, 0, 0]


def test_a_wrong_key_is_refused_and_the_next_client_is_served(agent, tmp_path):
    with pytest.raises(AgentError, match="refused our key"):
        run(call("127.0.0.1", agent.port, secrets.token_hex(32), "tail", rank=0, log_dir=str(tmp_path)))
    with pytest.raises(AgentError, match="no such log"):
        run(call("127.0.0.1", agent.port, KEY, "tail", rank=0, log_dir=str(tmp_path)))
    (tmp_path / "rank0.stdout").write_text("step 7\n")
    answer = run(call("127.0.0.1", agent.port, KEY, "tail", rank=0, log_dir=str(tmp_path)))
    assert answer["text"] == "step 7\n"
    assert run(call("127.0.0.1", agent.port, KEY, "interrupt")) == {"signalled": [], "gone": []}


@pytest.mark.parametrize("payload, error", [
    (b"not json\n", "the request is not a JSON line"),
    (b"[1, 2]\n", "the request is not a JSON object"),
    (b"\xff\xfe\n", "the request is not a JSON line"),
    (b'{"op": "tail"}\n', "bad auth"),
    (b'{"auth": 5, "op": "tail"}\n', "bad auth"),
    (b'{"auth": "AUTH", "op": "shutdown"}\n', "unknown op 'shutdown'"),
    (b'{"auth": "AUTH", "op": "interrupt", "ranks": "all"}\n', "ranks: expected a list"),
    (b'{"auth": "AUTH", "op": "tail", "rank": 0, "log_dir": "/"}\n', "not under this agent's log root"),
    (b'{"auth": "AUTH", "pad": "' + b"x" * LINE_LIMIT + b'"}\n', f"longer than {LINE_LIMIT}"),
    (b'{"auth": "AUTH", "op": "tail", "rank": 0, "bytes": Infinity, "log_dir": "/"}\n', "bytes: expected"),
    (b'{"auth": "AUTH", "op": "tail", "rank": 0, "log_dir": "\\ud800"}\n', "log_dir: expected"),
    (b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}\n", "nested too deeply"),   # was "internal error"
])
def test_bad_requests_get_one_error_line(agent, payload, error):
    answer = raw_exchange(agent.port, payload)
    assert list(answer) == ["error"] and error in answer["error"]


def test_a_bug_is_named_not_traced_and_the_agent_goes_on(agent, monkeypatch):
    monkeypatch.setattr(agent, "answer", lambda request: 1 / 0)
    answer = raw_exchange(agent.port, b'{"auth": "AUTH", "op": "tail"}\n')
    assert answer == {"error": "internal error: ZeroDivisionError"}
    monkeypatch.undo()
    assert raw_exchange(agent.port, b'{"auth": "AUTH", "op": "interrupt"}\n') == {"signalled": [], "gone": []}


def test_silent_and_surplus_clients_cost_a_slot_for_a_while_only(agent, monkeypatch):
    monkeypatch.setattr(server_module, "REQUEST_TIMEOUT_S", 0.5)
    silent = [socket.create_connection(("127.0.0.1", agent.port))
              for _ in range(server_module.MAX_CONNECTIONS)]
    time.sleep(0.2)
    extra = socket.create_connection(("127.0.0.1", agent.port), timeout=5)
    assert extra.recv(100) == b""   # refused at once: every slot is taken
    extra.close()
    time.sleep(1.0)                 # the silent ones timed out and left their slots
    assert raw_exchange(agent.port, b'{"auth": "AUTH", "op": "interrupt"}\n') == {"signalled": [], "gone": []}
    for connection in silent:
        assert connection.recv(200).startswith(b'{"agent":1')
        connection.close()


def test_the_client_names_what_went_wrong():
    with socket.create_server(("127.0.0.1", 0)) as mute:   # accepts, never greets
        port = mute.getsockname()[1]
        with pytest.raises(AgentError, match="did not answer within 0.3 s"):
            run(call("127.0.0.1", port, KEY, "interrupt", timeout=0.3))
    with pytest.raises(AgentError, match="connection refused"):
        run(call("127.0.0.1", port, KEY, "interrupt"))
    with pytest.raises(AgentError, match="the key is not hex"):
        run(call("127.0.0.1", port, "not hex", "interrupt"))


def test_a_subscriber_that_falls_behind_loses_its_oldest_samples():
    subscriber = Subscriber([b"static", b"history"])
    for n in range(QUEUE_LINES + 10):
        subscriber.push(b"%d" % n)
    lines = []
    while (line := subscriber.next_line(0)) is not None:
        lines.append(line)
    assert len(lines) == QUEUE_LINES + 2 and lines[-1] == b"%d" % (QUEUE_LINES + 9)
    assert subscriber.next_line(0.01) is None
    subscriber.push(b"late")
    subscriber.close()
    assert subscriber.next_line(1) is None


def test_the_digest_is_checked_in_constant_time_and_strictly():
    key = key_bytes(KEY)
    digest = auth_digest(key, "abc")
    assert authentic(key, "abc", digest) and not authentic(key, "abd", digest)
    assert not authentic(key, "abc", None) and not authentic(key, "abc", digest.upper()[:-1])
    with pytest.raises(ValueError):
        key_bytes("zz")


# ------------------------------------------------------------------ hostile JSON (hypothesis)

REQUESTS = [{"auth": "0" * 64, "op": "tail", "rank": 0, "stream": "stderr", "bytes": 100, "log_dir": "CELL"},
            {"auth": "0" * 64, "op": "interrupt", "ranks": [0]}, {"op": "unblock", "ranks": [0, 1]},
            {"op": "progress", "ranks": None}]
# the agent's ranks: this process under a start time it does not have (never signalled)
NOT_ME = {0: {"pid": os.getpid(), "create_time": 0.0}, 1: {"pid": os.getpid(), "create_time": 1.0}}


@FUZZ
@given(hostile(REQUESTS, changes=2))
def test_a_request_with_hostile_values_gets_an_answer_or_one_error_line(requests):
    """What a decoded request holds, as a peer wrote it: the answer the agent sends, or the
    protocol's error line, never another exception (which the client would see as "internal
    error", or as no answer at all)."""
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, "cell"))
        served = AgentServer(None, None, b"k", NOT_ME, root)
        for request in requests:
            if isinstance(request, dict) and request.get("log_dir") == "CELL":
                request["log_dir"] = os.path.join(root, "cell")
            try:
                request = decode_request(dumps(request).encode() + b"\n")
                line = encode(served.answer(request))
            except RequestError as refused:
                line = encode({"error": str(refused)})
            assert line.endswith(b"\n") and line.count(b"\n") == 1


def test_a_request_nested_too_deeply_is_refused():
    with pytest.raises(RequestError, match="nested too deeply"):
        decode_request(b"[" * 5000 + b"]" * 5000 + b"\n")


def read_line(data: bytes):
    """client._line on what an agent sent."""
    async def read():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await _line(reader, 5, "agent at w0:1")
    return asyncio.run(read())


@FUZZ
@given(hostile([{"agent": 1, "nonce": "ab" * 16}, {"signalled": [0], "gone": [1]}, {"error": "no such log"},
                {"type": "sample", "gpus": [[100, 75370, 38, 152.0, None, 0, 0]]}], changes=2))
def test_what_an_agent_sends_is_a_message_or_one_agent_error(messages):
    for message in messages:
        answer, error = only_our_error(read_line, dumps(message).encode() + b"\n")
        assert isinstance(answer, dict) or error.startswith("agent at w0:1")


def test_an_answer_nested_too_deeply_is_one_agent_error():
    with pytest.raises(AgentError, match="agent at w0:1 sent"):
        read_line(b"[" * 5000 + b"]" * 5000 + b"\n")
