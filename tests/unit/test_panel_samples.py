"""The JSON the Python side writes for the lab panel, kept as samples that the panel's TypeScript
tests type-check and run through the panel's model (labextension/test/samples/<name>.json).

Each document is built here by the real code, for a small cluster: two hosts, a World of 4 ranks
in mixed states (world/world.World.state, its live rank states), a doctor report with a finding
(doctor/command.save_report), the server's aggregator (cluster/live.LiveCluster: the collector,
the document's delta) fed by each host's agent sampling loop (agent/feed) replaying a real
capture (tests/fixtures/nvml), the GPU history export (gpu/pure/history) and the server's actions.
Every clock that code reads is the fixture's, and the values only this machine decides (the
kernel's pid and host, its launcher's pid) are fixed after a check, so the samples are the same
on every run.

A document that no longer equals its sample fails with what to do: rerun with
MLP_MAGIC_WRITE_SAMPLES=1 to write the samples anew, then `jlpm lint:types && jlpm test` in
labextension/ say which TypeScript types (labextension/src/model/) no longer fit.
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import types
from datetime import datetime
from pathlib import Path

import pytest

from mlp_magic.agent.feed import Feed
from mlp_magic.cluster import collect as cluster_collect
from mlp_magic.cluster import gpu_feed as cluster_gpu_feed
from mlp_magic.cluster import live as cluster_live
from mlp_magic.cluster.collect import CollectOptions
from mlp_magic.cluster.gpu_feed import histories_of
from mlp_magic.cluster.live import LiveCluster
from mlp_magic.cluster.reachability import Reachability
from mlp_magic.doctor.pure.report import ERROR, WARNING, Finding, Report
from mlp_magic.gpu.pure.history import history_json
from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.doctor import command as doctor_command
from mlp_magic.gpu import sampler as gpu_sampler
from mlp_magic.gpu.pure.model import GpuInfo, HostGpus
from mlp_magic.gpu.replay import ReplayNvml, load_capture
from mlp_magic.gpu.sampler import GpuSampler
from mlp_magic.panel import actions
from mlp_magic.world import published
from mlp_magic.world.live import LiveWorld
from mlp_magic.world.start.mpi import MpiInfo
from mlp_magic.world.processes import ManagedProcess
from mlp_magic.world.world import World, WorldSpec

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "labextension" / "test" / "samples"
CAPTURES = REPO / "tests" / "fixtures" / "nvml"
WRITE = os.environ.get("MLP_MAGIC_WRITE_SAMPLES") == "1"
NOW = 1795600800.0   # 2026-11-25T10:00:00Z, the panel's tests' NOW too
# What this machine decides in a World's record, fixed in the samples (checked first).
KERNEL = {"pid": 4766, "host": "worker0"}
LAUNCHER = {"pid": 4771, "create_time": NOW - 301.25}
WORLD_ID = "worker0-4766-1"
LOG_DIR = "/home/user/.mlp_magic/logs/worker0-4766-1/cell-2"
HOSTS = "worker0:2,worker1:2"
CELL = "%%mpirun\nfor step in range(steps):\n    train(step)"
# name -> where the panel gets it
SAMPLE_NAMES = {
    "cluster": "GET {base}/mlp-magic/cluster (and POST .../cluster/refresh)",
    "cluster_error": "GET {base}/mlp-magic/cluster when no topology can be read",
    "live_snapshot": "the websocket {base}/mlp-magic/live: its first message",
    "live_gpu_history": "the websocket: the GPU history a new panel gets",
    "live_gpus": "the websocket: every host's newest GPU samples, once a second",
    "live_patch": "the websocket: a change of the document",
    "gpu_history_export": "GET {base}/mlp-magic/gpus/history?format=json",
    "action_interrupt": "POST {base}/mlp-magic/worlds/{id}/interrupt",
    "action_restart": "POST {base}/mlp-magic/worlds/{id}/restart",
    "action_stacks_error": "POST {base}/mlp-magic/worlds/{id}/stacks, when no stack can be taken",
}


class Clock:
    """The wall clock (epoch seconds) of every part the samples come from."""

    def __init__(self, now: float):
        self.now = now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def freeze(monkeypatch, clock: Clock) -> None:
    """The modules that read the wall clock read ``clock`` (their own names for the standard
    library's ``time`` and ``datetime``: no code of ours is replaced)."""
    class FrozenDatetime(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.fromtimestamp(clock.now, tz)

    wall = types.SimpleNamespace(time=clock.time, monotonic=clock.time, sleep=clock.sleep)
    for module in (cluster_live, cluster_collect, published):
        monkeypatch.setattr(module, "datetime", FrozenDatetime)
    for module in (cluster_live, cluster_gpu_feed, gpu_sampler, doctor_command):
        monkeypatch.setattr(module, "time", wall)


def inventory(host: str, count: int, numa: int) -> HostGpus:
    """A host's GPU inventory as a World's engines probe it: H100s and one NIC."""
    gpus = [GpuInfo(i, "NVIDIA H100 80GB HBM3", f"0000:{0x18 + i:02x}:00.0", 81559, 75370, 100, numa, "0-23")
            for i in range(count)]
    devices = [g.device for g in gpus] + ["mlx5_0"]
    links = {a: {b: "X" if a == b else ("PIX" if "mlx5_0" in (a, b) else "NV18") for b in devices}
             for a in devices}
    return HostGpus(host=host, source="nvml", gpus=gpus, nics=["mlx5_0"], links=links)


class ReplayAgent:
    """A host's agent: its sampling loop (agent/feed) on the sampler, replaying a real capture."""

    def __init__(self, host: str, capture: str, proc_root: Path):
        ticks = Clock(0.0)   # the sampler's tick clock; the samples' times are the wall clock's
        replay = ReplayNvml(load_capture([str(CAPTURES / capture)]), sleep=ticks.sleep)
        self.sampler = GpuSampler(replay, "replay", str(proc_root), sleep=ticks.sleep, clock=ticks.time)
        self.feed = Feed(lambda: self.sampler, host=host)
        self.feed.open()
        self.subscriber = None

    def tick(self) -> None:
        """One beat of the agent's loop (Feed.run)."""
        self.feed.tick()
        self.sampler.wait_tick(1.0)

    def said(self) -> list:
        """The messages the agent sent its subscriber since last asked."""
        lines = []
        while (line := self.subscriber.next_line(0)) is not None:
            lines.append(json.loads(line))
        return lines


def doctor_report(*findings: Finding) -> Report:
    report = Report(hosts=("worker0", "worker1"), answered=2, seconds=4.2)
    for finding in findings:
        report.add(finding)
    return report


SHM = Finding(WARNING, "host", "/dev/shm", ("worker1",), "/dev/shm is 64 MiB", "docker --shm-size=16g")
XID = Finding(ERROR, "gpus", "XID error", ("worker1",), "GPU 0: XID 79", "drain the node")


class SmallCluster:
    """Two hosts, a World of 4 ranks running a cell, live GPUs, a doctor finding: the server's
    live model of it and what it sends a panel."""

    def __init__(self, folder: Path, clock: Clock):
        self.folder, self.clock = folder, clock
        self.state_dir = folder / "worlds"
        self.state_dir.mkdir(mode=0o700)
        self.env = {"MLP_MAGIC_STATE_DIR": str(self.state_dir)}
        self.topology = topology_from_environment({}, hosts=HOSTS)
        # The World's launcher: a real process, which as_seen checks and Restart stops.
        self.launcher = ManagedProcess([sys.executable, "-c", "import time; time.sleep(300)"],
                                       str(folder / "launcher.log"), name="mpiexec")
        self.world = self.running_world()
        self.agents = self.replay_agents()
        self.messages: list = []

    def close(self) -> None:
        self.world.live.close()
        if self.launcher.running():
            self.launcher.popen.kill()
        self.launcher.popen.wait(10)

    # ------------------------------------------------------------------ the World
    def running_world(self) -> World:
        """A World as World.start leaves it, at NOW - 300 s (its engines probed both hosts' GPUs)."""
        self.clock.now = NOW - 300
        world = World(WorldSpec(self.topology, 4), notice=lambda *args: None)
        world.live.close()   # its own publisher: the fixture publishes, at the fixture's times
        world.live = LiveWorld([row.host for row in world.layout], lambda: None, clock=self.clock.time)
        world.id, world.mpi = WORLD_ID, MpiInfo("/usr/bin/mpiexec", "openmpi", "4.1.6")
        world.started_at = published.now_iso()
        world.rank_to_engine = {rank: 10 + rank for rank in range(4)}
        world.identities = {rank: {"pid": 5101 + rank, "create_time": NOW - 302.5} for rank in range(4)}
        world.agents = {host: {"addr": f"10.0.0.{10 + n}", "port": 41001, "pid": 5111 + n}
                        for n, host in enumerate(("worker0", "worker1"))}
        world.agent_key = "0" * 64
        world.gpus = {"worker0": inventory("worker0", 4, 0).to_dict(),
                      "worker1": inventory("worker1", 1, 1).to_dict()}
        # ipyparallel's client of a started World (state() asks only that there is one)
        world.client, world.processes = object(), [self.launcher]
        world.live.ready()
        return world

    def run_a_cell(self) -> None:
        """A cell on every rank since NOW - 120 s: 0 and 1 busy and printing, 2 done, 3 dead."""
        live = self.world.live
        self.clock.now = NOW - 120
        live.cell_started(CELL, [0, 1, 2, 3], LOG_DIR)
        live.sent([0, 1, 2, 3])
        for at, change, args in ((NOW - 45, live.died, ([3],)), (NOW - 31, live.wrote, (2,)),
                                 (NOW - 30, live.ended, (2,)), (NOW - 3, live.wrote, (1,)),
                                 (NOW - 2, live.wrote, (0,))):
            self.clock.now = at
            change(*args)

    def end_the_cell(self) -> None:
        """Five seconds later: the cell is over; worker1 did not answer the World's GPU probe."""
        live = self.world.live
        self.clock.now = NOW + 4
        live.ended(0)
        live.ended(1)
        live.cell_ended(LOG_DIR)
        self.world.gpus = {"worker0": self.world.gpus["worker0"]}

    def publish(self) -> None:
        published.publish(self.world.state(), str(self.state_dir))

    # ------------------------------------------------------------------ the GPUs
    def replay_agents(self) -> dict:
        """worker0: four H100s hung in an NCCL all-gather; worker1: one H100 running a matmul,
        its process rank 2's (its environment says so, as /proc would)."""
        proc = self.folder / "proc"
        (proc / "506").mkdir(parents=True)
        (proc / "506" / "environ").write_bytes(
            b"OMPI_COMM_WORLD_RANK=2\0OMPI_COMM_WORLD_SIZE=4\0PMIX_NAMESPACE=prterun-worker0-4771@1\0")
        return {"worker0": ReplayAgent("worker0", "nccl-1550-h100-allgather-hang.txt", proc),
                "worker1": ReplayAgent("worker1", "h100-matmul-recorded.jsonl", proc)}

    def agents_sample(self, seconds: int) -> None:
        for _ in range(seconds):
            for agent in self.agents.values():
                agent.tick()
            self.clock.sleep(1.0)

    def agents_speak(self, live: LiveCluster) -> None:
        """What each agent sent is handed to the server's feed, as agent/client hands it."""
        for host, agent in self.agents.items():
            for message in agent.said():
                live.gpu_feed._take(host, message)

    # ------------------------------------------------------------------ the server
    def live_model(self) -> LiveCluster:
        """The server's aggregator as panel/snapshot.panel_model makes it (no probe of reachability)."""
        options = CollectOptions(hosts=HOSTS, gpus="local", reach_timeout=None, env={},
                                 state_dir=str(self.state_dir), published_gpus=True)
        return LiveCluster(options, str(self.state_dir), published.read_worlds)

    @staticmethod
    def gather(live: LiveCluster) -> None:
        """The aggregator's slow part (cluster/collect), the hosts' reachability given: they are
        names, not machines to probe."""
        live.parts = live.collector.gather()
        live.parts.reachability = {"worker0": Reachability(True, 0.4, None),
                                   "worker1": Reachability(True, 1.7, None)}

    def produce(self) -> dict:
        """Every sample, in the order a panel meets them. The aggregator's steps are taken by
        hand (its folder watch and timers would), with no event loop: no agent is dialled."""
        self.clock.now = NOW - 600
        doctor_command.save_report(doctor_report(SHM), self.env)
        self.run_a_cell()
        self.clock.now = NOW - 28
        self.agents_sample(26)   # before anyone watched: the agents' own history
        for agent in self.agents.values():
            agent.subscriber = agent.feed.subscribe()   # the server follows the agents
        self.agents_sample(1)
        self.clock.now = NOW
        self.publish()
        live = self.live_model()
        self.agents_speak(live)
        self.gather(live)
        live._reread_worlds()   # the World's file came (the folder watch's call)
        live.subscribe(lambda text: self.messages.append(json.loads(text)))   # a panel opens
        self.agents_sample(2)
        self.agents_speak(live)
        live._send_gpus()   # the aggregator's once-a-second beat
        self.end_the_cell()
        self.clock.now = NOW + 5
        doctor_command.save_report(doctor_report(SHM, XID), self.env)
        self.publish()
        live._worlds_changed()   # the folder watch saw both files change
        return {**self.sent_to_the_panel(live), **self.route_answers(live)}

    def sent_to_the_panel(self, live: LiveCluster) -> dict:
        kinds = [message["type"] for message in self.messages]
        assert kinds == ["snapshot", "gpu_history", "gpus", "patch"], kinds
        snapshot, history, gpus, patch = self.messages
        assert [op[0] for op in patch["ops"]].count("del") == 1   # worker1's GPUs left the World
        snapshot = dict(snapshot, doc=self.settled(snapshot["doc"]))
        return {"cluster": self.settled(live.doc), "live_patch": patch, "live_gpus": gpus,
                "live_gpu_history": history, "live_snapshot": snapshot}

    def route_answers(self, live: LiveCluster) -> dict:
        record = live.world(WORLD_ID)   # as the action routes find it (its private part too)
        export = history_json(asyncio.run(histories_of(live.gpu_feed, live.worlds)))
        # Without the agents' key no agent is dialled: each host says why it was not reached.
        keyless = dict(record, private=dict(record["private"], agent_key=None))
        interrupt = asyncio.run(actions.interrupt(keyless))
        restart = asyncio.run(actions.stop(record))   # stops the launcher, for real
        assert not self.launcher.running()
        stacks = asyncio.run(actions.stacks(dict(record, ranks=[])))
        return {"cluster_error": self.failed_document(), "gpu_history_export": export,
                "action_interrupt": interrupt, "action_restart": restart, "action_stacks_error": stacks}

    def failed_document(self) -> dict:
        """GET cluster when the hostfile named cannot be read: the reason, no host."""
        options = CollectOptions(hostfile="/nonexistent/mlp-magic/hostfile", gpus="local", reach_timeout=None,
                                 env={}, state_dir=str(self.state_dir), published_gpus=True)
        live = LiveCluster(options, str(self.state_dir), lambda folder: [])
        live.parts = live.collector.gather()
        live._rebuild()
        return live.doc

    def settled(self, doc: dict) -> dict:
        """``doc`` with what this machine decides in a World's record fixed, once checked to be
        what the code wrote: the kernel's pid and host, its launcher's pid and start time."""
        doc = json.loads(json.dumps(doc))
        for engine in [engine for host in doc["hosts"] for engine in host["engines"]]:
            assert engine["world_pid"] == os.getpid()
            engine["world_pid"] = KERNEL["pid"]
        for world in doc["worlds"]:
            assert (world["pid"], world["host"]) == (os.getpid(), socket.gethostname())
            launcher = {"pid": self.launcher.pid, "create_time": self.launcher.create_time}
            assert world["processes"] == [launcher]
            world.update(KERNEL, processes=[LAUNCHER])
        return doc


# ---------------------------------------------------------------------- the samples
def sample_text(value, indent: str = "") -> str:
    """Indented JSON, with each list of plain values on one line (GPU rows, op paths)."""
    inner = indent + "  "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(key)}: {sample_text(item, inner)}" for key, item in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list) and any(isinstance(item, (dict, list)) and item for item in value):
        return "[\n" + ",\n".join(inner + sample_text(item, inner) for item in value) + f"\n{indent}]"
    return json.dumps(value)


def first_difference(old, new, path="") -> str:
    """Where two JSON values first differ, for the failure's message."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(old) + [k for k in new if k not in old]:
            if key not in old or key not in new:
                return f"{path}/{key}: {'added' if key not in old else 'gone'}"
            if old[key] != new[key]:
                return first_difference(old[key], new[key], f"{path}/{key}")
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (a, b) in enumerate(zip(old, new)):
            if a != b:
                return first_difference(a, b, f"{path}/{index}")
    return f"{path or '/'}: {json.dumps(old)[:120]} -> {json.dumps(new)[:120]}"


@pytest.fixture(scope="module")
def produced(tmp_path_factory) -> dict:
    """{sample name: the JSON the Python side writes}, each through JSON as the server sends it."""
    clock = Clock(NOW)
    with pytest.MonkeyPatch.context() as monkeypatch:
        freeze(monkeypatch, clock)
        cluster = SmallCluster(tmp_path_factory.mktemp("panel-samples"), clock)
        try:
            documents = cluster.produce()
        finally:
            cluster.close()
    return {name: json.loads(json.dumps(document)) for name, document in documents.items()}


@pytest.mark.parametrize("name", sorted(SAMPLE_NAMES))
def test_the_panels_sample_is_what_the_python_side_writes(produced, name):
    path = SAMPLES / f"{name}.json"
    if WRITE:
        SAMPLES.mkdir(parents=True, exist_ok=True)
        path.write_text(sample_text(produced[name]) + "\n")
    assert path.exists(), f"no sample {path}: run this test with MLP_MAGIC_WRITE_SAMPLES=1 to write it"
    kept = json.loads(path.read_text())
    assert kept == produced[name], (
        f"{SAMPLE_NAMES[name]} is no longer what labextension/test/samples/{name}.json holds "
        f"({first_difference(kept, produced[name])}). Rerun with MLP_MAGIC_WRITE_SAMPLES=1 "
        f"(python -m pytest tests/unit/test_panel_samples.py) to write the samples anew, then run "
        f"`jlpm lint:types && jlpm test` in labextension/ and update the TypeScript types "
        f"(labextension/src/model/) where they no longer fit.")


def test_every_sample_file_is_one_the_python_side_writes():
    found = sorted(path.stem for path in SAMPLES.glob("*.json"))
    assert found == sorted(SAMPLE_NAMES), "a sample no test writes: remove it, or name it in SAMPLE_NAMES"
