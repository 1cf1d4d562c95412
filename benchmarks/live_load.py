"""What an open panel costs at 64 hosts x 8 GPUs; one command: ``python benchmarks/live_load.py``.

64 real agents (``python -m mlp_magic.agent``, as a World starts one per host) sample a fake NVML
once a second, replaying a real capture (tests/fixtures/nvml: an 8x H100 job during an NCCL hang,
its four GPUs' rows twice: 8 GPUs a host); a published World names them, 8 ranks a host (512 in
all), for a jupyter_server with mlp_magic's extension. Phases of ``--seconds`` each:
1. no tab open (the server follows no agent);
2. one tab: the live websocket (the document, then one "gpus" message a second for all hosts);
3. ``--tabs`` tabs;
4. the peer, in the same run: one and ``--tabs`` tabs polling ``GET mlp-magic/cluster`` every
   second (the document, which holds the hosts' GPUs while a tab is live; without the live feed a
   panel would have to poll to see anything move), beside the one live tab of phase 2.
Throughout, the ranks change state ``--flips-per-s`` times a second (4; a third of them busy, a
different third each time), as the issue's budget has it (0: the World stays as written).
Per tab: bytes a second received and the server's CPU (psutil, % of one core) over the phase
without tabs. Goals (issue 23): at most 50 KB/s and 2% of a core per tab. Also, in phase 2, how
soon the first samples reach a newly opened tab (its socket connected to its first "gpus"
message: the server starts following the agents then; the agents sample once a second). Goal:
under 2 s (it was tests/server/test_live_gpus_world's bound, for one host). No peer: a polling
tab sees the samples only while a live tab makes the server follow the agents.
Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_watch import Poller, SocketWatcher  # noqa: E402
from panel_load import cpu_seconds, free_loopback_port, start_server  # noqa: E402

from mlp_magic import config  # noqa: E402
from mlp_magic.agent.rank.start import _spawn  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CAPTURE = REPO / "tests/fixtures/nvml/nccl-1550-h100-allgather-hang.txt"
GOAL_BYTES_PER_S = 50_000
GOAL_CPU_PERCENT = 2.0
GOAL_FIRST_GPUS_S = 2.0


def eight_gpu_table(folder: Path) -> Path:
    """The capture's table with its four GPUs' rows again as GPUs 4-7."""
    lines = CAPTURE.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if re.match(r"\|\s+0\s+NVIDIA", line))
    last = max(i for i, line in enumerate(lines) if re.match(r"\|\s+3\s+NVIDIA", line)) + 4
    again = [re.sub(r"^\|(\s+)([0-3])(\s+NVIDIA)", lambda m: f"|{m[1]}{int(m[2]) + 4}{m[3]}", line)
             for line in lines[first:last]]
    path = folder / "eight-h100.txt"
    path.write_text("\n".join(lines[:last] + again + lines[last:]) + "\n")
    return path


def start_agents(count: int, key: str, replay: Path, log_root: Path) -> list:
    os.environ[config.NVML_REPLAY] = str(replay)
    setup = json.dumps({"key": key, "bind": "127.0.0.1", "log_root": str(log_root), "ranks": {}}).encode()
    return [_spawn(setup + b"\n", 30.0) for _ in range(count)]


def write_world(state_dir: Path, hosts: list, agents: list, key: str, gpus_per_host: int) -> None:
    ranks = [{"rank": h * gpus_per_host + g, "host": host, "state": "busy", "since": None,
              "last_output": None, "engine_id": h * gpus_per_host + g}
             for h, host in enumerate(hosts) for g in range(gpus_per_host)]
    record = {"id": "bench-1-1", "pid": os.getpid(), "host": socket.gethostname(), "state": "running",
              "np": len(ranks), "mpi": "openmpi", "ranks": ranks, "cell": None,
              "agents": {host: {"addr": "127.0.0.1", "port": answer["port"]}
                         for host, (_, answer) in zip(hosts, agents)},
              "private": {"agent_key": key}}
    (state_dir / "bench-1-1.json").write_text(json.dumps(record))


class Flipper:
    """Rewrites the World's record ``per_second`` times a second, a third of its ranks busy,
    a different third each time (as the kernel publishes: a new file renamed into place)."""

    def __init__(self, path: Path, per_second: float):
        self.path, self.per_second = path, per_second
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        if self.per_second > 0:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(5)

    def _run(self) -> None:
        record = json.loads(self.path.read_text())
        step = 0
        while not self.stopped.wait(1 / self.per_second):
            step += 1
            now = time.time()
            for row in record["ranks"]:
                row["state"] = "idle" if (row["rank"] + step) % 3 else "busy"
                row["since"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".000+00:00"
            part = self.path.parent / f".tmp-{self.path.name}"
            part.write_text(json.dumps(record))
            os.replace(part, self.path)


def phase(server: psutil.Process, seconds: float, watchers: list) -> dict:
    """The server's CPU (% of a core) and each watcher's bytes a second over ``seconds``."""
    for watcher in watchers:
        watcher.start()
    time.sleep(3.0)   # connected, the agents followed, the first snapshot in
    counted = [watcher.bytes for watcher in watchers]
    cpu, started = cpu_seconds(server), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    used = cpu_seconds(server) - cpu
    rates = [(watcher.bytes - before) / elapsed for watcher, before in zip(watchers, counted)]
    for watcher in watchers:
        watcher.stop()
    firsts = [w.first_at["gpus"] - w.opened_at for w in watchers
              if isinstance(w, SocketWatcher) and "gpus" in w.first_at and w.opened_at is not None]
    return {"cpu_percent": round(100 * used / elapsed, 2), "bytes_per_s": [round(r) for r in rates],
            "first_gpus_s": [round(f, 3) for f in firsts]}


def measure(base: str, token: str, server: psutil.Process, args) -> dict:
    def sockets(n):
        return [SocketWatcher(base, token) for _ in range(n)]

    def pollers(n):
        return [Poller(base, token, 1.0) for _ in range(n)]

    idle = phase(server, args.seconds, [])
    print(f"no tab: {idle}", flush=True)
    one = phase(server, args.seconds, sockets(1))
    print(f"1 live tab: {one}", flush=True)
    many = phase(server, args.seconds, sockets(args.tabs))
    print(f"{args.tabs} live tabs: {many}", flush=True)
    peer_one = phase(server, args.seconds, sockets(1) + pollers(1))
    print(f"1 live tab + 1 polling tab: {peer_one}", flush=True)
    peer_many = phase(server, args.seconds, sockets(1) + pollers(args.tabs))
    print(f"1 live tab + {args.tabs} polling tabs: {peer_many}", flush=True)
    return {"idle": idle, "one": one, "many": many, "peer_one": peer_one, "peer_many": peer_many}


def report(found: dict, args) -> dict:
    idle = found["idle"]["cpu_percent"]
    ours_bytes = sum(found["many"]["bytes_per_s"]) / args.tabs
    ours_cpu = (found["many"]["cpu_percent"] - idle) / args.tabs
    first_cpu = found["one"]["cpu_percent"] - idle
    peer_bytes = sum(found["peer_many"]["bytes_per_s"][1:]) / args.tabs
    peer_cpu = (found["peer_many"]["cpu_percent"] - found["one"]["cpu_percent"]) / args.tabs
    first_gpus = found["one"]["first_gpus_s"][0] if found["one"]["first_gpus_s"] else None
    return {
        "first_gpus_s": first_gpus, "goal_first_gpus_s": GOAL_FIRST_GPUS_S,
        "bytes_per_s_per_tab": round(ours_bytes), "peer_bytes_per_s_per_tab": round(peer_bytes),
        "bytes_ratio": round(ours_bytes / peer_bytes, 3) if peer_bytes else None,
        "cpu_percent_per_tab": round(ours_cpu, 2), "first_tab_cpu_percent": round(first_cpu, 2),
        "peer_cpu_percent_per_tab": round(peer_cpu, 2),
        "cpu_ratio": round(ours_cpu / peer_cpu, 3) if peer_cpu > 0 else None,
        "idle_cpu_percent": idle, "one_tab_server_cpu_percent": found["one"]["cpu_percent"],
        "meets_goals": ours_bytes <= GOAL_BYTES_PER_S and first_cpu <= GOAL_CPU_PERCENT
        and ours_cpu <= GOAL_CPU_PERCENT and first_gpus is not None and first_gpus <= GOAL_FIRST_GPUS_S,
        "goals": {"bytes_per_s": GOAL_BYTES_PER_S, "cpu_percent": GOAL_CPU_PERCENT},
        "hosts": args.hosts, "gpus_per_host": 8, "ranks": args.hosts * 8, "tabs": args.tabs,
        "rank_state_flips_per_s": args.flips_per_s,
        "seconds_per_phase": args.seconds, "phases": found,
        "peer": "GET mlp-magic/cluster every 1 s per tab",
    }


def run(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="mlp-live-load-") as tmp:
        home = Path(tmp)
        (home / "worlds").mkdir()
        key = secrets.token_hex(32)
        agents = start_agents(args.hosts, key, eight_gpu_table(home), home / "logs")
        try:
            hosts = [f"127.0.1.{i + 1}" for i in range(args.hosts)]
            write_world(home / "worlds", hosts, agents, key, 8)
            (home / "hostfile").write_text("".join(f"{host} slots=8\n" for host in hosts))
            port, token = free_loopback_port(), secrets.token_hex(16)
            server = start_server(home, home / "hostfile", port, token, cache_seconds=4.0)
            try:
                with Flipper(home / "worlds" / "bench-1-1.json", args.flips_per_s):
                    found = measure(f"http://127.0.0.1:{port}/", token, psutil.Process(server.pid), args)
            finally:
                server.terminate()
                server.wait(15)
        finally:
            for process, _ in agents:
                process.kill()
                process.wait()
    return report(found, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--tabs", type=int, default=4)
    parser.add_argument("--flips-per-s", type=float, default=4.0,
                        help="the ranks change state this often (0: never)")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds each phase is measured")
    args = parser.parse_args()
    if not 1 <= args.hosts <= 250 or args.tabs < 1 or args.seconds <= 0:
        parser.error("--hosts 1..250, --tabs >= 1, --seconds > 0")
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
