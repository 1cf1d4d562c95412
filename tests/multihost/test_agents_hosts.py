"""The panel's actions on a World across namespace hosts, through each host's agent: the agents
bind to their host's address (not loopback), the server side reaches them over the bridge, an
interrupt ends a hung cell on every rank of both hosts, a tail reads a rank's log from its own
host, and the World stays usable."""
import asyncio
import threading
import time

import pytest

from mlp_magic.panel import actions
from tests import worlds

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def world_on_two_hosts(ip, healthy_testbed, tmp_path, monkeypatch):
    bed = healthy_testbed
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("worker0 slots=2\nworker1 slots=2\n")
    monkeypatch.setenv("MLP_MAGIC_SSH", " ".join(bed.ssh_command()))
    for key, value in bed.env().items():
        monkeypatch.setenv(key, value)
    ip.run_line_magic("mpirun", "--stop")
    assert ip.run_cell(f"%%mpirun --hostfile {hostfile} -np 4\nprint('hello from', rank)").success
    yield ip, str(hostfile), bed
    ip.run_line_magic("mpirun", "--stop")


def _interrupt_when_busy(world, answers: list) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        record = world.state()
        if record["cell"] and all(row["state"] == "busy" for row in record["ranks"]):
            time.sleep(0.5)   # inside time.sleep on every rank
            answers.append(asyncio.run(actions.interrupt(world.state())))
            return
        time.sleep(0.05)


def test_actions_reach_the_ranks_of_other_hosts_through_their_agents(world_on_two_hosts, capsys):
    ip, hostfile, bed = world_on_two_hosts
    world = worlds.current_world()
    record = world.state()
    agents = record["agents"]
    assert {host: agent.get("addr") for host, agent in agents.items()} == {
        h.name: h.address for h in bed.hosts[:2]}, agents
    log = asyncio.run(actions.tail(record, 3, "stdout"))   # rank 3 lives on worker1
    assert log == "hello from 3\n"

    answers: list = []
    waiter = threading.Thread(target=_interrupt_when_busy, args=(world, answers), daemon=True)
    waiter.start()
    started = time.monotonic()
    hung = ip.run_cell(f"%%mpirun --hostfile {hostfile} -np 4\nimport time\ntime.sleep(120)")
    took = time.monotonic() - started
    waiter.join(10)
    assert answers == [{"world": record["id"], "signalled": "0-3", "problems": {}}], answers
    assert not hung.success and took < 60, took
    assert "KeyboardInterrupt" in capsys.readouterr().out
    # the World is the same and answers
    assert ip.run_cell(f"%%mpirun --hostfile {hostfile} -np 4\nprint(rank)").success
    assert worlds.current_world() == world


FORK_DEAF_TO_SIGTERM = """%%mpirun --hostfile {hostfile} -np 4 -o forked
import os, signal, time
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(300)
    os._exit(0)
print(child)
"""


def test_a_stop_ends_what_ranks_forked_on_other_hosts_through_their_agents(world_on_two_hosts):
    """The children of os.fork() in a cell, on hosts the kernel is not on: each host's agent stops
    what its ranks left in their sessions once they ended (the hosts share this pid space)."""
    import psutil

    ip, hostfile, _ = world_on_two_hosts
    assert ip.run_cell(FORK_DEAF_TO_SIGTERM.format(hostfile=hostfile)).success
    children = [int(result.stdout) for result in ip.user_ns["forked"]]

    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    assert all(running(pid) for pid in children)
    ip.run_line_magic("mpirun", "--stop")
    deadline = time.monotonic() + 30   # the agents give the ranks 5 s to end, then a TERM-KILL round
    while any(running(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(running(pid) for pid in children), [pid for pid in children if running(pid)]
