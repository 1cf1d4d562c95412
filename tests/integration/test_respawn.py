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


def test_a_rank_killed_in_a_gloo_all_reduce_comes_back_with_the_group_and_a_copied_model(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, "%%mpirun\nimport torch, torch.distributed as dist\ndist.init_process_group('gloo')\n"
                   "torch.manual_seed(rank)\nmodel = torch.nn.Linear(4, 2)\n"
                   "opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
                   "model(torch.ones(3, 4)).sum().backward()\nopt.step()\nt = torch.ones(1)") is None
    cell = ("%%mpirun\nimport os, signal, time\ntime.sleep(0.3)\nif rank == 2:\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\ndist.all_reduce(t)")
    assert "died" in str(run(ip, cell))
    capsys.readouterr()
    assert run(ip, "%mpirun --respawn --copy model,opt --from 1") is None
    out = capsys.readouterr().out
    assert "torch's default group made again over all 4 ranks (gloo" in out, out
    assert "copied model, opt (Linear, SGD;" in out and "from rank 1 to rank 2" in out, out
    # what the new rank lacks: the names of the set-up cell that were not copied, and its imports
    assert "rank 2 lacks 1 name that rank 1 has: t; and imports dist, os, signal, time, torch" in out, out
    # the copied model and optimizer are rank 1's, and the optimizer holds the copied model's parameters
    digest = ("import hashlib\nsd = {**model.state_dict(), **{f'opt{k}': v['momentum_buffer'] "
              "for k, v in opt.state_dict()['state'].items()}}\n"
              "print(hashlib.sha1(b''.join(v.numpy().tobytes() for v in sd.values())).hexdigest(), "
              "opt.param_groups[0]['params'][0] is model.weight)")
    assert run(ip, f"%%mpirun --ranks 1-2 -o digests\n{digest}") is None
    first, second = (r.stdout for r in ip.user_ns["digests"])
    assert first == second and first.endswith(" True\n"), (first, second)
    # gloo over all four, on the group made again (the new rank has only what was copied: the imports too)
    assert run(ip, "%%mpirun -o reduced\nimport torch, torch.distributed as dist\n"
                   "t = torch.ones(1) * (rank + 1)\ndist.all_reduce(t)\n"
                   "print(int(t.item()), dist.get_world_size())") is None
    assert [r.stdout for r in ip.user_ns["reduced"]] == ["10 4\n"] * 4


def test_two_deaths_with_rank_0_among_them_come_back_together(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, "%%mpirun\nkept = rank") is None
    cell = KILL_2.replace("if rank == 2:", "if rank in (0, 3):")
    assert "died" in str(run(ip, cell))
    capsys.readouterr()
    assert run(ip, "%mpirun --respawn --ranks 0") is None   # one of the two first
    out = capsys.readouterr().out
    assert "rank 0 (pid" in out and "started again" in out, out
    assert run(ip, "%mpirun --status") is None
    assert "running, rank 3 dead" in capsys.readouterr().out
    assert run(ip, "%mpirun --respawn") is None
    assert run(ip, "%%mpirun -o sums\nprint(comm.allreduce(rank), globals().get('kept'))") is None
    assert [r.stdout for r in ip.user_ns["sums"]] == ["6 None\n", "6 1\n", "6 2\n", "6 None\n"]
    # the respawned ranks' own death is a death as any other
    assert run(ip, "%%mpirun -o pids\nimport os\nprint(os.getpid())") is None
    os.kill(int(ip.user_ns["pids"][3].stdout), signal.SIGKILL)
    assert wait_until(lambda: run(ip, "%mpirun --status") is None
                      and "rank 3 dead" in capsys.readouterr().out, hang_bound(5))


def test_a_hung_mpi_call_after_a_respawn_is_unblocked_on_the_new_communicator(fresh_world, capsys):
    """--unblock revokes what stands for the World: after a respawn, the communicator that spans
    the new rank too (``comm``), not the old COMM_WORLD."""
    ip = fresh_world
    assert "died" in str(run(ip, KILL_2))
    assert run(ip, "%mpirun --respawn") is None
    error = run(ip, "%%mpirun --timeout 3\nif rank == 0:\n    comm.recv(source=2)")   # rank 2 never sends
    assert "timeout on ranks 0 (1 of 4)" in str(error), error
    capsys.readouterr()
    assert run(ip, "%mpirun --unblock") is None
    out = capsys.readouterr().out
    assert "rank 0" in out and "free" in out, out
    assert run(ip, "%%mpirun -o sums\nprint(comm.allreduce(1))") is None
    assert [r.stdout for r in ip.user_ns["sums"]] == ["4\n"] * 4
