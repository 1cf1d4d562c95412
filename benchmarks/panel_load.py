"""Server load of the MLP Cluster panel; one command: ``python benchmarks/panel_load.py``.

Starts a jupyter_server with the mlp_magic extension on 127.0.0.1 (a hostfile of this machine
plus loopback "hosts" answering on their ssh port, and a published World), then runs 20
simultaneous pollers, each fetching ``/mlp-magic/cluster`` every 5 s (as 20 open panels do,
phases spread over the interval) for 60 s, and measures the server process's CPU time (psutil)
as a percentage of one core. The same 20 pollers then hit the server's trivial ``/api/status``
for as long: the peer figure, taken in the same run on the same server. Goal: < 5% of a core.
Last line: one JSON object (cpu_percent, peer_cpu_percent, ratio, ...).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
from tornado.httpclient import AsyncHTTPClient

GOAL_PERCENT = 5.0
START_TIMEOUT = 60.0


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SshPortStandIns:
    """Listeners on 127.0.0.2.. that accept and hang up, as sshd ports do for a TCP probe."""

    def __init__(self, count: int):
        self.count = count
        self.servers = []
        self.ports = []

    async def start(self) -> None:
        async def hang_up(_reader, writer):
            writer.close()

        for index in range(self.count):
            server = await asyncio.start_server(hang_up, f"127.0.0.{index + 2}", 0)
            self.servers.append(server)
            self.ports.append(server.sockets[0].getsockname()[1])

    def hostfile_lines(self) -> list:
        return [f"root@127.0.0.{index + 2}:{port}" for index, port in enumerate(self.ports)]

    def close(self) -> None:
        for server in self.servers:
            server.close()


def write_world(state_dir: Path, hosts: list) -> None:
    """A World published by this (live) process: one engine per host, all idle."""
    ranks = [{"rank": i, "host": host, "engine_id": i, "state": "idle"} for i, host in enumerate(hosts)]
    world = {"pid": os.getpid(), "started_at": "2026-01-01T00:00:00+00:00",
             "updated_at": "2026-01-01T00:00:00+00:00", "np": len(ranks), "mpi": "openmpi", "ranks": ranks}
    (state_dir / f"{os.getpid()}.json").write_text(json.dumps(world))


def start_server(home: Path, hostfile: Path, port: int, token: str, cache_seconds: float) -> subprocess.Popen:
    config_dir = home / "config"
    config_dir.mkdir()
    (home / "root").mkdir()
    config = {
        "ServerApp": {"ip": "127.0.0.1", "port": port, "port_retries": 0, "open_browser": False,
                      "allow_root": True, "root_dir": str(home / "root"),
                      "jpserver_extensions": {"mlp_magic.panel": True}},
        "IdentityProvider": {"token": token},
        "MlpMagicPanel": {"hostfile": str(hostfile), "cache_seconds": cache_seconds},
    }
    (config_dir / "jupyter_server_config.json").write_text(json.dumps(config))
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config_dir), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), MLP_MAGIC_STATE_DIR=str(home / "worlds"))
    log = open(home / "server.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "jupyter_server"], env=env, cwd=home,
                              stdout=log, stderr=subprocess.STDOUT)
    return wait_until_serving(server, port, token, home / "server.log")


def wait_until_serving(server: subprocess.Popen, port: int, token: str, log: Path) -> subprocess.Popen:
    """``server`` once its ``/api/status`` answers on loopback; its log's end if it never does."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"jupyter server exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2):
                return server
        except OSError:
            time.sleep(0.3)
    server.kill()
    raise SystemExit(f"jupyter server did not start within {START_TIMEOUT:g} s:\n{log.read_text()[-3000:]}")


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system + times.children_user + times.children_system


async def poll_for(url: str, token: str, pollers: int, interval: float, duration: float) -> dict:
    """``pollers`` clients, each GET ``url`` every ``interval`` s for ``duration`` s."""
    client = AsyncHTTPClient(force_instance=True, max_clients=pollers + 5)
    headers = {"Authorization": f"token {token}"}
    counts = {"requests": 0, "failures": 0}

    async def poller(phase: float) -> None:
        start = time.monotonic() + phase
        ticks = 0
        while start + ticks * interval < stop:
            await asyncio.sleep(max(0.0, start + ticks * interval - time.monotonic()))
            response = await client.fetch(url, headers=headers, raise_error=False, request_timeout=10)
            counts["requests"] += 1
            counts["failures"] += response.code != 200
            ticks += 1

    stop = time.monotonic() + duration
    phases = [random.uniform(0, interval) for _ in range(pollers)]
    await asyncio.gather(*(poller(phase) for phase in phases))
    client.close()
    return counts


async def measure(process: psutil.Process, url: str, token: str, args) -> dict:
    before_cpu, before = cpu_seconds(process), time.monotonic()
    counts = await poll_for(url, token, args.pollers, args.interval, args.duration)
    used, elapsed = cpu_seconds(process) - before_cpu, time.monotonic() - before
    return {"cpu_percent": round(100.0 * used / elapsed, 3), "cpu_seconds": round(used, 3),
            "seconds": round(elapsed, 1), **counts}


async def idle_percent(process: psutil.Process, seconds: float) -> float:
    before_cpu, before = cpu_seconds(process), time.monotonic()
    await asyncio.sleep(seconds)
    return round(100.0 * (cpu_seconds(process) - before_cpu) / (time.monotonic() - before), 3)


async def run(args) -> dict:
    stand_ins = SshPortStandIns(args.hosts - 1)
    await stand_ins.start()
    with tempfile.TemporaryDirectory(prefix="mlp-panel-load-") as tmp:
        home = Path(tmp)
        hostfile = home / "hostfile"
        hostfile.write_text("\n".join([f"localhost slots={args.hosts}"] + stand_ins.hostfile_lines()) + "\n")
        (home / "worlds").mkdir()
        write_world(home / "worlds", ["localhost"] + [f"127.0.0.{i + 2}" for i in range(args.hosts - 1)])
        port, token = free_loopback_port(), secrets.token_hex(16)
        server = start_server(home, hostfile, port, token, args.cache_seconds)
        try:
            process = psutil.Process(server.pid)
            base = f"http://127.0.0.1:{port}/"
            await asyncio.sleep(2.0)  # let start-up work settle before measuring
            idle = await idle_percent(process, args.idle)
            print(f"idle server: {idle:.2f}% of a core over {args.idle:g} s", flush=True)
            panel = await measure(process, base + "mlp-magic/cluster", token, args)
            print(f"panel  {args.pollers} pollers x {args.duration:g} s: {panel}", flush=True)
            peer = await measure(process, base + "api/status", token, args)
            print(f"peer   {args.pollers} pollers x {args.duration:g} s: {peer}", flush=True)
        finally:
            server.terminate()
            server.wait(15)
            stand_ins.close()
    return {
        "cpu_percent": panel["cpu_percent"],
        "peer_cpu_percent": peer["cpu_percent"],
        "ratio": round(panel["cpu_percent"] / peer["cpu_percent"], 2) if peer["cpu_percent"] else None,
        "idle_cpu_percent": idle,
        "goal_percent": GOAL_PERCENT,
        "meets_goal": panel["cpu_percent"] < GOAL_PERCENT and panel["failures"] == 0,
        "pollers": args.pollers, "interval_s": args.interval, "duration_s": args.duration,
        "hosts": args.hosts,
        "cache_seconds": args.cache_seconds,
        "requests": panel["requests"], "peer_requests": peer["requests"],
        "failures": panel["failures"] + peer["failures"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pollers", type=int, default=20)
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between one poller's requests")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds each phase polls")
    parser.add_argument("--hosts", type=int, default=8, help="hosts in the hostfile (localhost + loopback)")
    parser.add_argument("--cache-seconds", type=float, default=4.0,
                        help="the server's snapshot cache (0: every request computes a snapshot)")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle measurement first")
    args = parser.parse_args()
    if not 1 <= args.hosts <= 250:
        parser.error("--hosts must be between 1 and 250 (127.0.0.2 .. 127.0.0.251)")
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
