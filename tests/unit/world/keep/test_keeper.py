"""machine/process_alive, the one check of whether a World's kernel, owner, keeper or process still
runs, on real processes: a zombie (exited, its parent has not reaped it) has ended."""
import os
import time

import psutil
import pytest

from mlp_magic.machine.process_alive import alive
from mlp_magic.world import published
from mlp_magic.world.keep import found, keeper
from tests.timing import hang_bound


def wait_for_zombie(pid: int) -> None:
    deadline = time.monotonic() + hang_bound(10)
    while psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"{pid} did not become a zombie"
        time.sleep(0.01)


@pytest.fixture
def zombie():
    """(pid, start time) of a child that has exited and that nobody reaps until the test ends."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)   # the child ends at once; this process does not wait for it yet
    try:
        started = psutil.Process(pid).create_time()
        wait_for_zombie(pid)
        yield pid, started
    finally:
        os.waitpid(pid, 0)


def test_a_zombie_is_not_alive_whether_its_start_time_is_known_or_not(zombie):
    pid, started = zombie
    assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE   # its pid still taken
    assert not alive((pid, started))
    assert not alive((pid, None))


def test_a_live_process_is_alive_and_a_reused_pid_is_another_process():
    me, started = os.getpid(), psutil.Process().create_time()
    assert alive((me, started)) and alive([me, started]) and alive((me, None))
    assert not alive((me, started - 1)) and not alive((me, started + 0.5))


@pytest.mark.parametrize("pair", [None, "12", (1, None), (0, None), (-1, None), (2 ** 63, None),
                                  (True, None), (os.getpid(), float("nan")), (os.getpid(), "now"),
                                  (os.getpid(),), (os.getpid(), None, None)])
def test_what_names_no_process_is_not_alive(pair):
    assert not alive(pair)


def test_a_world_whose_kernel_is_a_zombie_is_a_dead_kernels(tmp_path, zombie):
    """Not kept: no World to attach to (the reaper's); kept, with its keeper alive: listed with
    its kernel gone, and found for an attach without --force."""
    pid, _ = zombie
    published.publish({"pid": pid, "id": "vm-9-0", "np": 2, "private": {"workdir": "/nowhere"}},
                      str(tmp_path))
    assert published.read_worlds(str(tmp_path)) == []
    assert [w["id"] for w in published.orphaned_worlds(str(tmp_path))] == ["vm-9-0"]
    keeper_pair = [os.getpid(), psutil.Process().create_time()]   # this process stands for the keeper
    published.publish({"pid": pid, "id": "vm-9-0", "np": 2, "kept": True,
                       "private": {"workdir": "/nowhere", "keeper": keeper_pair}}, str(tmp_path))
    [world] = published.read_worlds(str(tmp_path))
    assert world["kernel"] == "gone" and published.orphaned_worlds(str(tmp_path)) == []
    assert found.find(None, str(tmp_path))["kernel"] == "gone"


def test_a_kept_world_whose_keeper_is_a_zombie_is_not_held(tmp_path, zombie):
    pid, started = zombie
    published.publish({"pid": pid, "id": "vm-9-1", "np": 2, "kept": True,
                       "private": {"workdir": "/nowhere", "keeper": [pid, started]}}, str(tmp_path))
    assert published.read_worlds(str(tmp_path)) == []


def test_the_keepers_wait_on_a_zombie_owner_ends_at_once(zombie):
    """Its pidfd is readable once the process exited, reaped or not: the keeper does not sleep
    a tick on a dead kernel."""
    started = time.monotonic()
    keeper._wait_for_end(zombie[0], 30)
    assert time.monotonic() - started < 5


def test_the_panel_shows_a_world_whose_launcher_is_a_zombie_stopped(zombie):
    from mlp_magic.cluster.live import as_seen

    me = {"pid": os.getpid(), "create_time": psutil.Process().create_time()}
    world = {"state": "running", "ranks": [{"rank": 0, "host": "h", "state": "idle"}],
             "processes": [me, {"pid": zombie[0], "create_time": zombie[1]}]}
    assert as_seen(dict(world, processes=[me])) == dict(world, processes=[me])
    seen = as_seen(world)
    assert seen["state"] == "stopped" and [r["state"] for r in seen["ranks"]] == ["dead"]
