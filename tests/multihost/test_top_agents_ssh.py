"""``mlp-magic top``'s GPU agents over ssh (cluster/gpu_feed.stdio_argv, follow_stdio) on the
namespace test bed: real sshd, real OpenSSH. The hosts have no GPU, so the remote interpreter is
a wrapper that replays a real capture (the bed's hosts share this filesystem) and notes its host:
each host's agent really ran there, its readings came back, and none is left once top stops."""
from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import psutil
import pytest

from mlp_magic.cluster.gpu_feed import GpuFeed, stdio_argv

pytestmark = pytest.mark.alone   # counts agents machine-wide

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures/nvml/nccl-1550-h100-allgather-hang.txt"


def remote_agents() -> set:
    """The agents themselves (the ssh clients carry the same words in their remote command)."""
    return {p.pid for p in psutil.process_iter(["cmdline", "name"])
            if "mlp_magic.agent" in " ".join(p.info["cmdline"] or []) and p.info["name"] != "ssh"}


def test_each_hosts_agent_runs_there_over_ssh_and_ends_with_top(bed, tmp_path):
    seen = tmp_path / "seen"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nhostname >>{seen}\n"
                      f"MLP_MAGIC_NVML_REPLAY={CAPTURE} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    hosts = bed.host_names()
    before = remote_agents()

    async def follow() -> tuple:
        feed = GpuFeed(lambda: None)
        feed.follow_stdio({host: stdio_argv(host, bed.ssh_command(), str(python)) for host in hosts})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(host in feed.latest for host in hosts):
            await asyncio.sleep(0.1)
        found = (dict(feed.latest), dict(feed.hosts), len(remote_agents() - before))
        feed.stop()
        await asyncio.sleep(0.2)
        return found

    latest, views, running = asyncio.run(follow())
    assert sorted(latest) == sorted(hosts) and running == len(hosts)
    for host in hosts:
        _, rows = latest[host]
        assert len(rows) == 4 and rows[0][:4] == [100, 75370, 38, 152.0]
        assert views[host]["source"] == "replay" and views[host]["error"] is None
    assert sorted(seen.read_text().split()) == sorted(hosts)
    deadline = time.monotonic() + 10
    while remote_agents() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert remote_agents() - before == set()


def test_a_host_down_says_so_in_its_row(bed, tmp_path):
    down = bed.host_names()[1]

    async def follow() -> dict:
        feed = GpuFeed(lambda: None)
        with bed.host_down(1):
            feed.follow_stdio({down: stdio_argv(down, bed.ssh_command())})
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and down not in feed.hosts:
                await asyncio.sleep(0.1)
        feed.stop()
        return feed.hosts

    views = asyncio.run(follow())
    assert views[down]["error"].startswith("GPU agent ended (exit 255)"), views
