"""Faults around the kernel's World, in a kernel of its own (tests/integration/kernels): the
World's controller killed between cells."""
from tests.integration.kernels import Kernel, wait_until_gone
from tests.timing import hang_bound


def test_a_killed_controller_is_said_in_one_line_at_the_next_cell_and_nothing_is_left():
    kernel = Kernel()
    try:
        assert kernel.cell("%%mpirun -np 2\nx = 1")[1] is None
        family = kernel.world_pids()
        controller = kernel.child("ipyparallel.controller")
        controller.kill()
        # the ranks are stopped at once, not at their heartbeat's end; the keeper stays for the kernel
        keeper = kernel.child("mlp_magic.world.keeper").pid
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
