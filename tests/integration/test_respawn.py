"""``%mpirun --respawn``: a dead rank starts again as the same rank, on its host, and the live
ranks keep their state; MPI (``comm``) and torch's default group span all the ranks again. In the
session's real kernel, real mpiexec (ULFM), real engines."""
import os
import signal

import pytest

from tests.integration.conftest import run, timed_run
from tests.timing import hang_bound, wait_until

pytestmark = pytest.mark.timeout(300)

KILL_2 = ("%%mpirun\nimport os, signal, time\ntime.sleep(0.3)\nif rank == 2:\n"
          "    os.kill(os.getpid(), signal.SIGKILL)\ntime.sleep(30)")


def _pids(ip) -> dict:
    assert run(ip, "%%mpirun -o pids\nimport os\nprint(os.getpid())") is None
    return {r.rank: int(r.stdout) for r in ip.user_ns["pids"]}


def test_a_killed_rank_comes_back_as_itself_and_mpi_spans_every_rank_again(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, "%%mpirun\nkept = rank * 10") is None
    before = _pids(ip)
    assert "died" in str(run(ip, KILL_2))
    out = capsys.readouterr().out
    assert "`%mpirun --respawn` brings it back" in out, out
    error, elapsed = timed_run(ip, "%mpirun --respawn")
    out = capsys.readouterr().out
    assert error is None, (error, out)
    assert "rank 2 (pid" in out and "started again in" in out, out
    assert "`comm` is a communicator of all 4 ranks" in out
    assert "rank 2 lacks 1 name that rank 0 has: kept; and imports os, signal, time" in out, out
    after = _pids(ip)
    assert {r: after[r] for r in (0, 1, 3)} == {r: before[r] for r in (0, 1, 3)}   # the same processes
    assert after[2] != before[2]
    # its identity: the same rank, and the variables a rank has
    assert run(ip, "%%mpirun -o who\nimport os\nprint(rank, os.environ['RANK'], os.environ['LOCAL_RANK'], "
                   "world_size)") is None
    assert [r.stdout for r in ip.user_ns["who"]] == [f"{r} {r} {r} 4\n" for r in range(4)]
    # the survivors kept their state; MPI collectives over all four
    assert run(ip, "%%mpirun -o sums\nprint(comm.allreduce(rank), comm.Get_rank(), comm.Get_size(), "
                   "globals().get('kept'))") is None
    assert [r.stdout for r in ip.user_ns["sums"]] == ["6 0 4 0\n", "6 1 4 10\n", "6 2 4 None\n", "6 3 4 30\n"]
    assert run(ip, "%mpirun --status") is None
    status = capsys.readouterr().out
    assert "dead" not in status, status
    assert elapsed < hang_bound(10), elapsed


def test_respawn_refuses_what_it_cannot_do_and_changes_nothing(fresh_world, capsys):
    ip = fresh_world
    error = run(ip, "%mpirun --respawn")
    assert "%mpirun --respawn: no rank is dead; nothing to start again" in str(error)
    assert "died" in str(run(ip, KILL_2))
    for line, expected in [
        ("%mpirun --respawn --ranks 1", "%mpirun --respawn --ranks: rank 1 is alive; the dead are 2"),
        ("%mpirun --respawn --from 1", "--from RANK names where --copy copies from: give --copy NAMES too"),
        ("%mpirun --respawn --copy x --from 2", "--from 2: rank 2 is dead; the live ranks are 0-1,3"),
        ("%mpirun --respawn --copy nothing_here", "rank 0 has no nothing_here; nothing was started"),
        ("%mpirun --respawn --copy 1x", "expected a Python name, got '1x'"),
    ]:
        error = run(ip, line)
        assert expected in str(error), (line, error)
    capsys.readouterr()
    assert run(ip, "%mpirun --status") is None
    assert "running, rank 2 dead" in capsys.readouterr().out
