"""The per-host agent as a real process, started the way a World starts it: a real Python (standing
in for a host's first engine) calls agent/rank/start.start_agent, and the tests talk to the
agent over TCP with agent/client, on real captured GPU readings (MLP_MAGIC_NVML_REPLAY)."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from mlp_magic.agent.client import AgentError, call, subscribe
from mlp_magic.agent.rank.start import process_create_time
from tests.timing import hang_bound, wait_until

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "nvml"
REPLAY = os.pathsep.join(str(FIXTURES / name) for name in ("nccl-1550-h100-allgather-hang.txt",
                                                           "nccl-1967-h100-p2p-hang.txt"))
# The engine's part: start the agent (twice: the second call must return the first agent), say
# what it got, then live on, shrugging off SIGINT as an engine outside a cell does.
ENGINE = r"""
import json, signal, sys, time
from mlp_magic.agent.rank.start import start_agent
signal.signal(signal.SIGINT, lambda *args: None)
setup = json.loads(sys.stdin.readline())
first = start_agent(setup["key"], "127.0.0.1", setup["ranks"], setup["log_root"])
second = start_agent(setup["key"], "127.0.0.1", {}, setup["log_root"])
print(json.dumps({"first": first, "second": second}), flush=True)
time.sleep(600)
"""
RANK = "import sys, time\ntry:\n    time.sleep(120)\nexcept KeyboardInterrupt:\n    sys.exit(3)\n"


class Engine:
    """A Python that started an agent: ``answer`` is start_agent's, ``key`` the agent's key."""

    def __init__(self, ranks: dict, log_root: Path, replay: str | None = REPLAY, script: str = ENGINE):
        self.key = secrets.token_hex(32)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("MLP_MAGIC_NVML_REPLAY", None)
        if replay:
            env["MLP_MAGIC_NVML_REPLAY"] = replay
        self.process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=env, start_new_session=True)
        setup = {"key": self.key, "ranks": ranks, "log_root": str(log_root)}
        self.process.stdin.write(json.dumps(setup).encode() + b"\n")
        self.process.stdin.flush()
        self.said = json.loads(self.process.stdout.readline())
        self.answer, self.second = self.said["first"], self.said["second"]
        self.agent = psutil.Process(self.answer["pid"])

    def call(self, op: str, key: str | None = None, **args) -> dict:
        coroutine = call("127.0.0.1", self.answer["port"], key or self.key, op, timeout=10, **args)
        return asyncio.run(coroutine)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        try:
            self.agent.wait(5)
        except psutil.Error:
            pass


@pytest.fixture
def start(tmp_path):
    engines = []

    def started(ranks=None, replay=REPLAY, script=ENGINE) -> Engine:
        engines.append(Engine(ranks or {}, tmp_path / "logs", replay, script))
        return engines[-1]
    yield started
    for engine in engines:
        engine.stop()


@pytest.fixture
def rank_process():
    children = []

    def started():
        children.append(subprocess.Popen([sys.executable, "-c", RANK]))
        time.sleep(0.3)   # into its sleep, where a SIGINT is a KeyboardInterrupt
        return children[-1]
    yield started
    for child in children:
        child.kill()
        child.wait()


def stream(engine: Engine, samples: int) -> list:
    """The subscribe stream until ``samples`` samples came."""
    messages = []

    async def listen():
        listening = subscribe("127.0.0.1", engine.answer["port"], engine.key, messages.append)
        task = asyncio.ensure_future(listening)
        while sum(m["type"] == "sample" for m in messages) < samples:
            await asyncio.sleep(0.05)
            if task.done():
                task.result()
        task.cancel()
    asyncio.run(asyncio.wait_for(listen(), 30))
    return messages


def test_the_engine_starts_one_agent_that_streams_changing_gpu_samples(start):
    engine = start()
    assert engine.second == engine.answer   # a second call returns the running agent
    assert "mlp_magic.agent" in " ".join(engine.agent.cmdline())
    assert engine.key not in " ".join(engine.agent.cmdline())   # the key travels on stdin only
    messages = stream(engine, 3)
    static, history = messages[0], messages[1]
    assert (static["type"], static["source"], static["error"]) == ("static", "replay", None)
    assert [g["name"] for g in static["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 2
    assert history["type"] == "history" and history["gpus"] == 2
    samples = [m for m in messages if m["type"] == "sample"]
    utils = [s["gpus"][0][0] for s in samples]
    powers = [s["gpus"][0][3] for s in samples]
    assert set(utils) == {100, 0}            # the hang's GPU 0, then the other capture's
    assert set(powers) == {152.0, 69.0}
    assert all(b["t"] - a["t"] == pytest.approx(1.0, abs=0.5) for a, b in zip(samples, samples[1:]))


def test_a_wrong_key_is_refused(start):
    engine = start()
    with pytest.raises(AgentError, match="refused our key"):
        engine.call("interrupt", key=secrets.token_hex(32))
    assert engine.call("interrupt") == {"signalled": [], "gone": []}


def test_interrupt_reaches_its_ranks_and_no_reused_pid(start, rank_process):
    ours, stranger = rank_process(), rank_process()
    ranks = {"0": {"pid": ours.pid, "create_time": process_create_time(ours.pid)},
             "1": {"pid": stranger.pid, "create_time": process_create_time(stranger.pid) - 60}}
    engine = start(ranks)
    assert engine.call("interrupt") == {"signalled": [0], "gone": [1]}
    assert ours.wait(10) == 3          # its KeyboardInterrupt
    time.sleep(0.5)
    assert stranger.poll() is None     # the pid it was given is another process now: left alone


def test_tail_reads_a_rank_log_under_the_root_only(start, tmp_path):
    cell = tmp_path / "logs" / "20261125-100000-1"
    cell.mkdir(parents=True)
    (cell / "rank0.stderr").write_text("Traceback: one\nRuntimeError: NCCL timeout\n")
    engine = start()
    answer = engine.call("tail", rank=0, stream="stderr", log_dir=str(cell), bytes=25)
    assert answer == {"text": "RuntimeError: NCCL timeout\n"[-25:], "size": 42, "truncated": True}
    with pytest.raises(AgentError, match="not under this agent's log root"):
        engine.call("tail", rank=0, stream="stderr", log_dir=str(tmp_path))


def test_the_agent_ends_with_its_engine_and_leaves_nothing(start):
    engine = start()
    agent = engine.agent
    engine.process.send_signal(signal.SIGKILL)
    engine.process.wait()
    # it ends at once (well under a second); the bound only tells that from never
    assert wait_until(lambda: ended(agent), hang_bound(1.0)), "the agent outlived its engine"
    assert wait_until(lambda: not psutil.pid_exists(agent.pid) or ended(agent), hang_bound(1.0))


def ended(agent: psutil.Process) -> bool:
    with contextlib.suppress(psutil.NoSuchProcess):
        return not agent.is_running() or agent.status() == psutil.STATUS_ZOMBIE
    return True


def test_the_agent_ends_with_its_engine_while_a_forked_child_holds_its_stdin(start):
    """A cell that forked (multiprocessing's fork, os.fork) leaves a child holding the agent's
    stdin pipe: the engine's death alone, seen through its pidfd, ends the agent."""
    said = 'print(json.dumps({"first": first, "second": second}), flush=True)'
    forking = ENGINE.replace(said, "import os\nchild = os.fork()\nif child == 0:\n    time.sleep(600)\n"
                                   "    os._exit(0)\n" + said.replace("second}", 'second, "child": child}'))
    engine = start(script=forking)
    child = psutil.Process(engine.said["child"])
    try:
        engine.process.send_signal(signal.SIGKILL)
        engine.process.wait()
        assert child.is_running()   # the pipe's writer lives on
        assert wait_until(lambda: ended(engine.agent), hang_bound(1.0)), "the agent outlived its engine"
    finally:
        child.kill()
        child.wait(5)


def test_a_sigint_to_the_engines_group_or_to_the_agent_leaves_it_running(start):
    engine = start()
    assert os.getpgid(engine.agent.pid) != os.getpgid(engine.process.pid)
    os.killpg(os.getpgid(engine.process.pid), signal.SIGINT)   # Ctrl-C for the engines
    engine.agent.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert engine.agent.is_running() and engine.agent.status() != psutil.STATUS_ZOMBIE
    assert engine.call("interrupt") == {"signalled": [], "gone": []}


@pytest.mark.skipif(os.path.exists("/proc/driver/nvidia"), reason="this machine has an NVIDIA driver")
def test_a_machine_without_nvml_says_no_gpus(start):
    engine = start(replay=None)
    static = stream(engine, 1)[0]
    assert (static["type"], static["source"], static["error"]) == ("static", "none", "no GPUs")
    assert static["gpus"] == []


def test_a_bad_setup_is_one_error_and_leaves_no_agent():
    from mlp_magic.agent.rank.start import start_agent
    from mlp_magic.errors import MlpMagicError

    before = {p.pid for p in psutil.Process().children()}
    with pytest.raises(MlpMagicError, match="the GPU agent did not start: bad agent setup on stdin"):
        start_agent("not hex", "127.0.0.1", {}, "/tmp")
    assert {p.pid for p in psutil.Process().children()} - before == set()


def test_stdio_mode_streams_until_stdin_closes():
    env = dict(os.environ, PYTHONPATH=str(ROOT), MLP_MAGIC_NVML_REPLAY=REPLAY)
    agent = subprocess.Popen([sys.executable, "-m", "mlp_magic.agent", "--stdio"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=env)
    try:
        kinds = [json.loads(agent.stdout.readline())["type"] for _ in range(4)]
        assert kinds == ["static", "history", "sample", "sample"]
        agent.stdin.close()
        assert agent.wait(hang_bound(0.5)) == 0   # its stdin closed: it ends
    finally:
        agent.kill()
        agent.wait()
