"""A rank's death costs only that rank (Open MPI's ULFM: ``mpiexec --with-ft ulfm``): the cell it
died in returns soon with the others' output, the others keep their state and run the next cells,
a collective with the dead rank fails at once instead of hanging; without ULFM (turned off) a
death ends every rank, as before, and the World said so when it started. In the session's real
kernel, real mpiexec, real engines."""
import os
import signal
import subprocess
import sys

import pytest

from mlp_magic.mpirun.run import SURVIVORS_GRACE_S
from tests.integration.conftest import run, timed_run
from tests.timing import hang_bound, wait_until

pytestmark = pytest.mark.timeout(240)

DIE_IN_A_CELL = ("%%mpirun -o died\nimport os, signal, time\nprint('alive', rank, flush=True)\n"
                 "time.sleep(0.5)\nif rank == 2:\n    {death}\ntime.sleep(60)")
KILLED = DIE_IN_A_CELL.format(death="os.kill(os.getpid(), signal.SIGKILL)")   # as the OOM killer does
EXITED = DIE_IN_A_CELL.format(death="os._exit(3)")


def test_a_dying_rank_costs_only_that_rank(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, "%%mpirun\nkept = rank * 10") is None
    capsys.readouterr()
    error, elapsed = timed_run(ip, KILLED)
    # the death seen soon, the others given their grace, not their 60 s
    assert elapsed < hang_bound(0.5 + SURVIVORS_GRACE_S + 1), elapsed
    assert "died" in str(error)
    assert [r.stdout for r in ip.user_ns["died"]] == [f"alive {r}\n" for r in range(4)]
    out = capsys.readouterr().out
    assert "rank 2 (pid" in out and "was killed by a signal during the cell" in out
    assert "the other 3 ranks kept their state and run the next cells without rank 2" in out
    assert "would hang" not in out   # the others' MPI heard of it (the Barrier below)

    assert run(ip, "%%mpirun -o after\nprint(kept)") is None
    after = ip.user_ns["after"]
    assert [(r.rank, r.stdout) for r in after] == [(0, "0\n"), (1, "10\n"), (3, "30\n")]
    out = capsys.readouterr().out
    assert "rank 2 died in an earlier cell: running on the other 3" in out

    assert run(ip, "%mpirun --status") is None
    assert "running, rank 2 dead" in capsys.readouterr().out
    error = run(ip, "%%mpirun --ranks 1-2\nprint('never')")
    assert "--ranks: rank 2 died in an earlier cell; the World runs on ranks 0-1,3" in str(error)
    assert "never" not in capsys.readouterr().out

    # a collective with the dead rank is an error at once on every survivor, not a hang
    error, elapsed = timed_run(ip, "%%mpirun -o barrier\nfrom mpi4py import MPI\ntry:\n"
                                   "    MPI.COMM_WORLD.Barrier()\n    print('passed')\n"
                                   "except MPI.Exception as e:\n    print('failed')")
    assert error is None and elapsed < hang_bound(1), elapsed
    assert [r.stdout for r in ip.user_ns["barrier"]] == ["failed\n"] * 3
    capsys.readouterr()
    error, elapsed = timed_run(ip, "%%mpirun\nfrom mpi4py import MPI\nMPI.COMM_WORLD.Barrier()")
    assert "on ranks 0-1,3 (3 of 3)" in str(error) and elapsed < hang_bound(1), (error, elapsed)
    out = capsys.readouterr().out
    assert ("rank 2 is dead: a collective over every rank (MPI's COMM_WORLD, torch's default group) "
            "fails without it; the live ranks can go on among themselves") in out, out

    assert run(ip, "%mpirun --restart") is None
    assert run(ip, "%%mpirun -o back\nprint('back')") is None
    assert [r.rank for r in ip.user_ns["back"]] == [0, 1, 2, 3]


def test_a_rank_killed_between_cells_is_left_out_of_the_next(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, "%%mpirun -o pids\nimport os\nkept = rank\nprint(os.getpid())") is None
    pid = int(ip.user_ns["pids"][1].stdout)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: run(ip, "%mpirun --status") is None
                      and "rank 1 dead" in capsys.readouterr().out, hang_bound(2))
    assert run(ip, "%%mpirun -o after\nprint(kept)") is None
    assert [(r.rank, r.stdout) for r in ip.user_ns["after"]] == [(0, "0\n"), (2, "2\n"), (3, "3\n")]
    assert "rank 1 died in an earlier cell: running on the other 3" in capsys.readouterr().out
    # the live picture says so too: mlp-magic top's one frame marks rank 1 dead ("x")
    top = [sys.executable, "-m", "mlp_magic.cli", "top", "-H", "localhost:4", "--once"]

    def frame() -> list:
        shown = subprocess.run(top, capture_output=True, text=True, timeout=60).stdout
        return [line.split() for line in shown.splitlines()]
    assert wait_until(lambda: ["localhost", "0-3", ".x.."] in frame(), hang_bound(5))


def test_a_rank_exiting_with_a_status_is_left_out_and_the_note_says_mpi_did_not_hear(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, "%%mpirun\nkept = rank") is None
    error, elapsed = timed_run(ip, EXITED)
    assert "died" in str(error) and elapsed < hang_bound(0.5 + SURVIVORS_GRACE_S + 1), elapsed
    out = capsys.readouterr().out
    assert "exited with status 3 during the cell" in out
    assert ("Open MPI does not tell the other ranks of a non-zero exit, "
            "so an MPI call with rank 2 would hang") in out
    assert run(ip, "%%mpirun -o after\nprint(kept)") is None
    assert [(r.rank, r.stdout) for r in ip.user_ns["after"]] == [(0, "0\n"), (1, "1\n"), (3, "3\n")]


def test_with_ulfm_turned_off_a_death_ends_every_rank_as_the_world_said(ip, no_world, monkeypatch, capsys):
    monkeypatch.setenv("OMPI_MCA_mpi_ft_enable", "0")
    assert run(ip, "%%mpirun -np 4\npass") is None
    out = capsys.readouterr().out
    assert ("mlp_magic: a rank's death ends every rank of this World: "
            "OMPI_MCA_mpi_ft_enable=0 turns ULFM off") in out
    error, elapsed = timed_run(ip, EXITED)
    assert elapsed < hang_bound(0.5 + 2), elapsed
    assert "died" in str(error)
    assert [r.stdout for r in ip.user_ns["died"]] == [f"alive {r}\n" for r in range(4)]
    out = capsys.readouterr().out
    assert "rank 2 (pid" in out and "died first" in out and "Exit code:    3" in out
    error = run(ip, "%mpirun --respawn")   # nothing to bring back into: said in one line
    assert "%mpirun --respawn: this World's ranks end together when one dies (no ULFM" in str(error), error
    assert run(ip, "%mpirun --restart") is None
    assert run(ip, "%mpirun --stop") is None


def test_two_deaths_at_once_rank_0_among_them_leave_the_other_two_running(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, "%%mpirun\nkept = rank * 10") is None
    capsys.readouterr()
    cell = DIE_IN_A_CELL.replace("if rank == 2:", "if rank in (0, 3):").format(
        death="os.kill(os.getpid(), signal.SIGKILL)")
    error, elapsed = timed_run(ip, cell)
    assert "died" in str(error) and elapsed < hang_bound(0.5 + SURVIVORS_GRACE_S + 1), elapsed
    out = capsys.readouterr().out
    assert "rank 0 (pid" in out and "rank 3 (pid" in out, out
    assert "the other 2 ranks kept their state and run the next cells without ranks 0,3" in out, out
    assert run(ip, "%%mpirun -o after\nprint(kept)") is None
    assert [(r.rank, r.stdout) for r in ip.user_ns["after"]] == [(1, "10\n"), (2, "20\n")]
    assert run(ip, "%mpirun --status") is None
    assert "running, ranks 0,3 dead" in capsys.readouterr().out


def test_survivors_blocked_in_a_gloo_collective_with_the_dead_rank_are_freed(fresh_world, capsys):
    from mlp_magic.unblock.pure.timing import BOUND_S

    ip = fresh_world
    assert run(ip, "%%mpirun\nimport torch, torch.distributed as dist\ndist.init_process_group('gloo')\n"
                   "t = torch.ones(1)\nkept = rank") is None
    capsys.readouterr()
    cell = ("%%mpirun -o reduced\nimport os, signal, time\ntime.sleep(0.5)\nif rank == 2:\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\ndist.all_reduce(t)")
    error, elapsed = timed_run(ip, cell)
    assert "died" in str(error) and elapsed < hang_bound(0.5 + SURVIVORS_GRACE_S + BOUND_S + 1), elapsed
    assert "the other 3 ranks kept their state" in capsys.readouterr().out
    # no survivor left blocked: the next cell runs, and says the group cannot be made again
    assert run(ip, "%%mpirun -o after\nprint(kept)") is None
    assert [r.stdout for r in ip.user_ns["after"]] == ["0\n", "1\n", "3\n"]
    assert "the default process group was not made again: rank 2 died" in capsys.readouterr().out
    error, elapsed = timed_run(ip, "%%mpirun -o again\ndist.all_reduce(t)")
    assert error is not None and elapsed < hang_bound(2), elapsed   # fails at once, never hangs
    assert [(r.rank, r.status) for r in ip.user_ns["again"]] == [(0, "error"), (1, "error"), (3, "error")]
    assert "rank 2 is dead: a collective over every rank" in capsys.readouterr().out
