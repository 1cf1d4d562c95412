"""%allrun through a live World's engines (one per host, no ssh), and its fallback."""
import os
import signal
import time

import psutil
import pytest

from mlp_magic.errors import HostFailure
from tests import worlds
from tests.timing import hang_bound, wait_until

from tests.integration.conftest import run

pytestmark = pytest.mark.timeout(180)


def _world_is_free() -> bool:
    """In the kernel: a World is up and no rank of it still runs a cell."""
    world = worlds.current_world()
    return world is not None and not (world.busy_job is not None and world.busy_job.unfinished_ranks())


@pytest.fixture
def world_up(ip):
    if not ip.call(_world_is_free):
        run(ip, "%mpirun --stop")
        assert run(ip, "%%mpirun -np 4\npass") is None
    return ip


def test_allrun_runs_once_per_host_through_the_engines(world_up, monkeypatch):
    ip = world_up
    # If ssh were used, this command would fail: the engine path must not touch it.
    monkeypatch.setenv("MLP_MAGIC_SSH", "/nonexistent/ssh")
    assert run(ip, "%allrun -o once echo pid $$ && hostname") is None
    once = ip.user_ns["once"]
    assert len(once) == 1 and once.results[0].host == "localhost"  # one host, not four ranks
    engine_pids = {identity["pid"] for identity in worlds.current_world().identities.values()}
    shell_parent = once.results[0].stdout.split()[1]
    assert shell_parent.isdigit() and int(shell_parent) not in engine_pids  # a child shell ran it


def test_allrun_cell_script_and_exit_status(world_up, capsys):
    ip = world_up
    error = run(ip, "%%allrun -o script\nset -e\necho step one\nexit 3\n")
    assert isinstance(error, HostFailure)
    script = ip.user_ns["script"]
    result = script.results[0]
    assert (result.status, result.exit_code, result.stdout) == ("failed", 3, "step one\n")
    assert script.exit_status == 3
    assert "exit 3" in capsys.readouterr().out


def test_a_process_left_in_the_background_is_not_waited_for_on_the_engines(world_up):
    """It held the notebook for the whole sleep, saying nothing of what it waited for."""
    ip = world_up
    started = time.monotonic()
    error = run(ip, "%allrun -o bg sh -c 'sleep 120 & echo $!'")
    took = time.monotonic() - started
    result = ip.user_ns["bg"].results[0]
    background = int(result.stdout.split()[0])
    try:
        assert error is None and took < hang_bound(2.0), took
        assert "a process it left in the background still holds its output" in result.stderr
    finally:
        os.kill(background, signal.SIGKILL)


def test_allrun_timeout_kills_the_command_on_the_engine_host(world_up):
    ip = world_up
    started = time.monotonic()
    error = run(ip, "%allrun -t 1 -o slow sleep 31; echo never")
    assert time.monotonic() - started < hang_bound(1 + 1)   # the 1 s timeout, not the 31 s sleep
    assert isinstance(error, HostFailure)
    assert ip.user_ns["slow"].results[0].status == "timeout"
    assert "never" not in ip.user_ns["slow"].results[0].stdout
    leftover = [p.pid for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "31"]]
    assert leftover == [], "the timed-out command is still running"


def test_ctrl_c_stops_the_command_on_the_engines(world_up):
    ip = world_up
    timer = ip.interrupt_after(1.0)   # the frontend's stop button
    started = time.monotonic()
    error = run(ip, "%allrun -o cut echo started; sleep 32")
    timer.join()
    assert time.monotonic() - started < hang_bound(1.0 + 1.0)   # the Ctrl-C at 1 s, not the 32 s sleep
    assert isinstance(error, HostFailure) and "interrupted" in str(error)
    assert ip.user_ns["cut"].results[0].stdout == "started\n"

    def leftover() -> list:
        return [p.pid for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "32"]]

    assert wait_until(lambda: leftover() == [], hang_bound(0.3)), "the interrupted command is still running"
    assert run(ip, "%allrun -o after echo fine") is None  # the engines are free again


def test_an_engine_that_cannot_answer_is_given_up_at_the_timeout(world_up):
    """The engine that runs the command is stopped (SIGSTOP: alive, idle in the World's eyes,
    silent): with --timeout the call returns that host timed out, instead of waiting forever."""
    import os
    import signal

    ip = world_up
    world = worlds.current_world()
    pid = world.identities[0]["pid"]   # rank 0: the first engine on its host runs the command
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        error = run(ip, "%allrun -t 1 -o frozen echo hi")
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert isinstance(error, HostFailure), error
    result = ip.user_ns["frozen"].results[0]
    assert result.status == "timeout" and "no answer from localhost in time" in result.stderr, result
    assert took < hang_bound(1 + 2), f"{took:.1f} s"   # the 1 s timeout, not a wait on the stopped engine
    run(ip, "%mpirun --stop")   # the next test starts a fresh World
