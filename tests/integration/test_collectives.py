"""The hang report's collectives section (issue 31, part 2) on a real 4-rank World: a real gloo
process group, PyTorch's flight recorder turned on by the World, real hung collectives."""
import subprocess
import sys

import pytest

from mlp_magic.stacks.pure.collectives import TITLE
from tests.integration.conftest import child_pids, run, timed_run
from tests.timing import wait_until

pytestmark = pytest.mark.timeout(300)

SETUP = """%%mpirun -np 4
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
for _ in range(3):
    dist.all_reduce(torch.ones(2))
"""


@pytest.fixture
def gloo_world(ip):
    run(ip, "%mpirun --stop")
    before = child_pids()
    assert run(ip, SETUP) is None
    yield ip
    run(ip, "%mpirun --stop")
    assert wait_until(lambda: not child_pids() - before), "processes left behind"


SKIP = "%%mpirun --timeout 3\nt = torch.ones(2)\nif rank != 3:\n    dist.all_reduce(t)\n"   # rank 3 skips one
BEHIND = ("ranks 0-2 (3): in all_reduce #4 [2] float32 (cell:3); "
          "rank 3: completed #3, in no collective, behind by 1")


def _report(ip, capsys, cell: str) -> str:
    error, _ = timed_run(ip, cell)
    assert "timeout on" in str(error)
    return capsys.readouterr().out


# alone: in 2 of 3 full runs on 2 cores (2026-12-07) this failed under the other worker's load, once
# with no dump from ranks 0-2 (a 52 s World start just before), once with rank 3's #3 not yet
# completed in its flight recorder 5 s after it returned; alone and in other runs it passes
@pytest.mark.alone
def test_a_rank_that_ran_one_collective_fewer_is_named_with_both_numbers(gloo_world, capsys):
    ip = gloo_world
    said = _report(ip, capsys, SKIP)
    assert f"{TITLE}\ndefault group: {BEHIND}\n" in said, said
    # %mpirun --stacks on the World still hung: the same section, beside the same stacks
    assert run(ip, "%mpirun --stacks") is None
    again = capsys.readouterr().out
    assert f"default group: {BEHIND}\n" in again, again
    # mlp-magic stacks (py-spy, from outside the kernel; the panel's Stacks too) on the same World
    done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "stacks"], capture_output=True, text=True,
                          timeout=120)
    assert f"default group: {BEHIND}\n" in done.stdout, done.stdout + done.stderr
    # unblocked and made again: the new group's numbers start over, the old group is not shown
    assert run(ip, "%mpirun --unblock") is None
    said = _report(ip, capsys, SKIP)
    assert ("default group: ranks 0-2 (3): in all_reduce #1 [2] float32 (cell:3); "
            "rank 3: no collective yet, behind by 1\n") in said, said
    assert said.count("default group") == 1 and "group '" not in said, said


def test_a_size_mismatch_between_ranks_is_named(gloo_world, capsys):
    ip = gloo_world
    said = _report(ip, capsys, "%%mpirun --timeout 3\nt = torch.ones(2 if rank != 3 else 3)\n"
                               "dist.all_reduce(t)\n")
    assert "rank 3: in all_reduce #4 [3] float32 (cell:2)" in said, said
    mismatch = "  mismatch at #4: ranks 0-2 (3) all_reduce [2] float32; rank 3 all_reduce [3] float32\n"
    assert mismatch in said, said


def test_a_world_without_torch_distributed_has_no_section(ip, capsys):
    run(ip, "%mpirun --stop")
    before = child_pids()
    try:
        error, _ = timed_run(ip, "%%mpirun -np 2 --timeout 3\nif rank == 0:\n    comm.Barrier()\n")
        said = capsys.readouterr().out
        assert "timeout on ranks 0 (1 of 2)" in str(error), error
        assert "Where each rank is" in said and "rank 0 did not stop on SIGINT" in said, said
        assert "collectives" not in said and "recorder" not in said, said
    finally:
        run(ip, "%mpirun --stop")
        assert wait_until(lambda: not child_pids() - before), "processes left behind"
