"""Faults around the kernel's World, in a kernel of its own (tests/integration/kernels): the
World's controller killed between cells, the kernel killed while it stops its World."""
import os
import signal

import pytest

from tests.integration.kernels import Kernel, running, wait_until_gone
from tests.timing import hang_bound, wait_until


def test_a_killed_controller_is_said_in_one_line_at_the_next_cell_and_nothing_is_left():
    kernel = Kernel()
    try:
        assert kernel.cell("%%mpirun -np 2\nx = 1")[1] is None
        family = kernel.world_pids()
        controller = kernel.child("ipyparallel.controller")
        controller.kill()
        # the ranks are stopped at once, not at their heartbeat's end; the keeper stays for the kernel
        keeper = kernel.child("mlp_magic.world.keep.keeper").pid
        assert wait_until_gone(family - {keeper}, hang_bound(10)) == set()
        out, error = kernel.cell("%%mpirun\nprint(x)")
        assert error is not None and "Traceback" not in out and out.count("\n") <= 3, out
        assert (f"the World's controller (ipcontroller, pid {controller.pid}) was killed by SIGKILL: "
                "its ranks were stopped, and what they held is lost; run the cell again to start a new "
                "World") in out, out
        assert wait_until_gone(family, hang_bound(5)) == set()
        out, error = kernel.cell("%%mpirun\nprint('again', rank)")
        assert error is None and "again {rank}" in out, out
    finally:
        kernel.kill()


@pytest.mark.parametrize("keep", ["", " --keep"])
def test_a_kernel_killed_while_it_stops_its_world_leaves_nothing_behind(keep, tmp_path):
    """The kernel dies in the middle of ``%mpirun --stop``, its ranks slow to exit: the keeper
    finishes the stop, a kept World's too (it was being stopped), and no process of it is left."""
    kernel = Kernel()
    try:
        slow_exit = ("import atexit, pathlib, time\n"   # each rank says it is exiting, then dawdles
                     f"exiting = pathlib.Path({str(tmp_path)!r}) / str(rank)\n"
                     "atexit.register(lambda: (exiting.touch(), time.sleep(60)))")
        assert kernel.cell(f"%%mpirun -np 2{keep}\n{slow_exit}")[1] is None
        family = kernel.world_pids()
        assert kernel.child("ipyparallel.controller") is not None
        kernel.send("%mpirun --stop")
        assert wait_until(lambda: len(list(tmp_path.iterdir())) == 2, hang_bound(5))
        kernel.kill()   # the stop has begun: the ranks were asked to exit and are dawdling
        assert wait_until_gone(family, hang_bound(10)) == set()
    finally:
        if kernel.process.poll() is None:
            kernel.kill()
        for pid in running(family if "family" in locals() else ()):   # never left to a later test
            os.kill(pid, signal.SIGKILL)
