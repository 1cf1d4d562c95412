"""Finding a World to attach to or stop (world/keep/found.find), and the keeper's decisions
(world/keep/keeper.keep_watch) on real processes standing for a kernel and a World's controller."""
import os
import subprocess
import threading
import time

import psutil
import pytest

from mlp_magic.machine.deadline import until
from mlp_magic.errors import MlpMagicError
from mlp_magic.world import published
from mlp_magic.world.keep import found, keeper


@pytest.fixture
def sleeper():
    started = []

    def start():
        process = subprocess.Popen(["sleep", "60"])
        started.append(process)
        return process
    yield start
    for process in started:
        process.kill()
        process.wait()


def publish(folder, pid: int, world_id: str, workdir: str = "/nowhere", **fields) -> str:
    published.publish({"pid": pid, "id": world_id, "np": 2, "private": {"workdir": workdir}, **fields},
                      str(folder))
    return published.record_path(pid, str(folder))


def test_found_by_id_by_its_start_or_as_the_only_one(tmp_path, sleeper):
    first, second = sleeper(), sleeper()
    publish(tmp_path, first.pid, "vm-1-0")
    assert found.find("vm-1-0", str(tmp_path))["pid"] == first.pid
    assert found.find("vm-1", str(tmp_path))["pid"] == first.pid
    assert found.find(None, str(tmp_path))["pid"] == first.pid
    publish(tmp_path, second.pid, "vm-12-0")
    with pytest.raises(MlpMagicError, match=r"^'vm-1' is the start of 2 Worlds' ids: give more of it$"):
        found.find("vm-1", str(tmp_path))
    with pytest.raises(MlpMagicError, match=r"^2 Worlds on this machine: give the id of one\nID +KERNEL"):
        found.find(None, str(tmp_path))
    with pytest.raises(MlpMagicError, match=r"^no World 'nope' on this machine: `mlp-magic worlds` lists"):
        found.find("nope", str(tmp_path))


def test_a_world_of_a_dead_kernel_is_not_found(tmp_path, sleeper):
    gone = sleeper()
    publish(tmp_path, gone.pid, "vm-2-0")
    gone.kill()
    gone.wait()
    with pytest.raises(MlpMagicError, match="^no World to attach to on this machine"):
        found.find(None, str(tmp_path))


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_world_is_named_and_left_alone(tmp_path, sleeper):
    path = publish(tmp_path, sleeper().pid, "vm-3-0")
    os.chown(path, 65534, 65534)
    with pytest.raises(MlpMagicError, match=r"^World vm-3-0 belongs to user (nobody|id 65534): only they"):
        found.find("vm-3-0", str(tmp_path))


def watch(workdir) -> threading.Thread:
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("why", keeper.keep_watch(str(workdir))))
    thread.result = result
    thread.start()
    return thread


def controller_record(tmp_path, kernel, controller) -> str:
    processes = [{"pid": controller.pid, "create_time": psutil.Process(controller.pid).create_time()}]
    return publish(tmp_path / "worlds", kernel.pid, "vm-4-0", processes=processes)


@pytest.mark.parametrize("kept_world, why", [(False, "its kernel is gone and it was not kept"),
                                             (True, "no kernel attached for 0.0003 h")])
@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "a zombie"])
def test_the_keeper_stops_the_world_when_its_kernel_is_gone_or_after_its_idle_limit(
        tmp_path, sleeper, kept_world, why, reaped):
    (tmp_path / "worlds").mkdir()
    (tmp_path / "run").mkdir()
    kernel, controller = sleeper(), sleeper()
    record = controller_record(tmp_path, kernel, controller)
    owner = (kernel.pid, psutil.Process(kernel.pid).create_time())
    keeper.write_keep(str(tmp_path / "run"), owner, kept_world, 0.0003, record)   # about 1 s
    thread = watch(tmp_path / "run")
    thread.join(1.5)
    assert thread.is_alive(), "the keeper left while its kernel lived"
    kernel.kill()
    if reaped:
        kernel.wait()
    else:   # killed, its parent (this process) not waiting yet: a zombie is a dead kernel
        zombie = lambda: psutil.Process(kernel.pid).status() == psutil.STATUS_ZOMBIE  # noqa: E731
        assert until(zombie, time.monotonic() + 5)
    thread.join(10)
    assert thread.result == {"why": why}
    assert controller.wait(5) is not None
    assert not (tmp_path / "run").exists() and not os.path.exists(record)


def test_the_keeper_leaves_when_the_kernel_stopped_the_world(tmp_path, sleeper):
    (tmp_path / "worlds").mkdir()
    (tmp_path / "run").mkdir()
    kernel, controller = sleeper(), sleeper()
    record = controller_record(tmp_path, kernel, controller)
    keeper.write_keep(str(tmp_path / "run"), (kernel.pid, None), False, 8, record)
    thread = watch(tmp_path / "run")
    os.unlink(keeper.keep_path(str(tmp_path / "run")))
    thread.join(5)
    assert thread.result == {"why": "the kernel stopped the World"}
    assert controller.poll() is None   # not the keeper's to stop then
