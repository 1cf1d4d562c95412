"""Worlds that outlive their kernel (``--keep``), taken up by another kernel (``--attach``), listed
and stopped from a terminal (``mlp-magic worlds``, ``mlp-magic stop``): real kernels in processes
of their own, killed for real, real ranks holding state across them."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from mlp_magic.machine.deadline import until
from tests.integration.kernels import Kernel, running, wait_until_gone
from tests.kernel import Kernel as JupyterKernel
from tests.timing import hang_bound

KEEP = "%%mpirun -np 2 --keep\nx = rank * 10\n"


def mlp_magic(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlp_magic.cli", *argv], capture_output=True, text=True,
                          timeout=hang_bound(60))


def listed() -> list:
    done = mlp_magic("worlds", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def worlds_here(tmp_path, monkeypatch):
    """The test's kernels publish their Worlds in a folder of the test's own (the test session's
    World is never listed, nor stopped); at the end every World listed there is stopped."""
    monkeypatch.setenv("MLP_MAGIC_STATE_DIR", str(tmp_path / "worlds"))
    yield
    for world in listed():
        mlp_magic("stop", world["id"])


@pytest.fixture
def kernels(worlds_here):
    """Kernels made by the test (IPython in a process of its own), each killed at the end."""
    made = []
    yield lambda **env: made.append(Kernel(env)) or made[-1]
    for kernel in made:
        if kernel.process.poll() is None:
            kernel.kill()


@pytest.fixture
def jupyter_kernels(worlds_here):
    """Real ipykernels driven through jupyter_client, this process their parent as a frontend is:
    one killed by the test stays a zombie until the end, when each is shut down and reaped."""
    made = []
    yield lambda: made.append(JupyterKernel(echo=False)) or made[-1]
    for kernel in made:
        kernel.shutdown()   # waits for a dead one too: no zombie is left


def test_a_kept_world_outlives_its_killed_kernel_and_another_kernel_attaches_with_its_state(kernels):
    first = kernels()
    out, error = first.cell(KEEP)
    assert error is None, out
    assert "kept: outlives its kernel, stops 8 h after the last kernel leaves" in out
    family = first.world_pids()
    first.kill()
    assert wait_until_gone(family, 3) == family, "the kept World went with its kernel"
    [world] = listed()
    assert (world["kernel"], world["kept"], world["keep_hours"], world["np"]) == ("gone", True, 8.0, 2)
    table = mlp_magic("worlds").stdout
    row = rf"{world['id']}\s+{first.pid} gone\s+2\s+localhost\s+running\s+yes, 8 h\s+20"
    assert re.search(row, table), table

    second = kernels()
    out, error = second.cell("%mpirun --attach")
    assert error is None and "attached to World of 2 ranks" in out, out
    out, error = second.cell("%%mpirun -o seen\nprint(x + 1, rank)")
    assert error is None and "{1,11} {rank}" in out, out
    second.exit()   # a normal exit (atexit): kept, it is left running again
    assert running(family) == family
    [world] = listed()
    assert (world["kernel"], world["pid"]) == ("gone", second.pid)

    done = mlp_magic("stop", world["id"])
    assert done.returncode == 0 and f"stopped World {world['id']} (2 ranks;" in done.stdout, done.stdout
    assert wait_until_gone(family, hang_bound(15)) == set()
    assert listed() == []


def test_a_killed_kernel_that_is_a_zombie_is_gone_and_its_kept_world_is_attached_without_force(
        jupyter_kernels):
    """A frontend reaps a dead kernel only when it next polls it: until then the kernel is a zombie
    and its pid is still taken. It is a dead kernel all the same: ``mlp-magic worlds`` says so, the
    keeper marks the World idle, and another kernel attaches with no --force."""
    first = jupyter_kernels()
    run = first.run_cell("%%mpirun -np 2\nx = rank * 10")
    assert run.success, run.shown
    run = first.run_cell("%mpirun --keep")
    assert run.success and "kept: outlives its kernel" in run.shown, run.shown
    family = {p.pid for p in psutil.Process(first.pid).children(recursive=True)}
    os.kill(first.pid, signal.SIGKILL)   # the OOM killer's way; its parent, this process, waits later
    zombie = lambda: psutil.Process(first.pid).status() == psutil.STATUS_ZOMBIE  # noqa: E731
    assert until(zombie, time.monotonic() + hang_bound(10)), psutil.Process(first.pid).status()
    [world] = listed()
    assert (world["kernel"], world["pid"], world["kept"]) == ("gone", first.pid, True), world
    # the keeper too: the record says since when the World has had no kernel (a file it writes)
    assert until(lambda: listed()[0]["idle_since"], time.monotonic() + hang_bound(10)), listed()
    table = mlp_magic("worlds").stdout
    assert re.search(rf"{world['id']}\s+{first.pid} gone\s+2\s", table), table

    second = jupyter_kernels()
    run = second.run_cell("%mpirun --attach")
    assert run.success and "attached to World of 2 ranks" in run.shown, run.shown
    run = second.run_cell("%%mpirun\nprint(x + 1)")
    assert run.success and "{1,11}" in run.shown, run.shown
    assert zombie() and running(family) == family   # still unreaped; the World went on
    [world] = listed()
    assert (world["kernel"], world["pid"], world["idle_since"]) == ("alive", second.pid, None), world


def test_a_world_that_is_not_kept_goes_with_its_kernel_even_after_no_keep(kernels):
    first = kernels()
    assert first.cell(KEEP)[1] is None
    out, error = first.cell("%mpirun --no-keep")
    assert error is None and "is no longer kept: it stops with this kernel" in out, out
    family = first.world_pids()
    first.kill()
    assert wait_until_gone(family, 15) == set()
    assert listed() == []


def test_a_kept_world_stops_itself_at_its_idle_limit(kernels):
    first = kernels(MLP_MAGIC_KEEP_HOURS="0.001")   # 3.6 s
    out, error = first.cell(KEEP)
    assert error is None and "stops 0.06 min after the last kernel leaves" in out, out
    family = first.world_pids()
    first.kill()
    assert [w["kernel"] for w in listed()] == ["gone"]
    assert wait_until_gone(family, hang_bound(20)) == set()
    assert listed() == []


def test_a_world_driven_by_a_live_kernel_is_refused_then_taken_over_with_force(kernels):
    first, second = kernels(), kernels()
    assert first.cell("%%mpirun -np 2\ny = rank + 100")[1] is None
    [world] = listed()
    out, error = second.cell("%mpirun --attach")
    assert error is not None and re.search(rf"World {world['id']} is driven by kernel pid {first.pid}: "
                                           r"`%mpirun --attach ID --force` takes it over", out), out
    out, error = second.cell(f"%mpirun --attach {world['id']} --force")
    assert error is None and "attached to World of 2 ranks" in out, out
    out, error = second.cell("%%mpirun\nprint(y)")
    assert error is None and "{100,101}" in out, out
    out, error = first.cell("%mpirun --status")
    assert f"World {world['id']} was taken over by kernel pid {second.pid}" in out, out
    assert "no World running" in out, out
    family = second.world_pids() | first.world_pids()
    second.kill()   # not kept: it goes with the kernel that drives it now
    assert wait_until_gone(family - running([first.pid]), 15) - first.world_pids() == set()


@pytest.mark.parametrize("line, expected", [
    ("%mpirun --attach nope", "no World 'nope' on this machine: `mlp-magic worlds` lists them"),
    ("%mpirun --attach", "no World to attach to on this machine (`mlp-magic worlds` lists them)"),
    ("%mpirun --attach a b", "%mpirun: --attach takes one World id, got 'a b'"),
    ("%mpirun --keep", "no World running: `%%mpirun --keep` starts one kept"),
])
def test_bad_attach_and_keep_lines_are_one_line_each(kernels, line, expected):
    out, error = kernels().cell(line)
    assert error is not None and expected in out and "Traceback" not in out, out


def test_a_bad_keep_hours_is_refused_and_changes_nothing(kernels):
    first = kernels(MLP_MAGIC_KEEP_HOURS="forever")
    assert first.cell("%%mpirun -np 2\nz = 1")[1] is None
    out, error = first.cell("%mpirun --keep")
    assert error is not None and "MLP_MAGIC_KEEP_HOURS='forever': expected a number of hours" in out, out
    [world] = listed()
    assert world["kept"] is False


def test_attach_to_a_world_whose_controller_is_gone_is_one_line(kernels):
    first = kernels()
    assert first.cell(KEEP)[1] is None
    controller = first.child("ipyparallel.controller")
    family = first.world_pids()
    first.kill()
    controller.kill()
    out, error = kernels().cell("%mpirun --attach")
    assert error is not None and "Traceback" not in out, out
    # The ranks leave once their controller is gone, so mpiexec may have ended too by now.
    gone = r"no World to attach to|the World's ipcontroller(, mpiexec)? ended: there is nothing to attach to"
    assert re.search(gone, out), out
    assert wait_until_gone(family, hang_bound(15)) == set()
