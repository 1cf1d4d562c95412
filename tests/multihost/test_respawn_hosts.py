"""``%mpirun --respawn`` across namespace hosts: a rank on the second host dies and starts again
there, as the same rank, with the controller's address carried to it; MPI and torch's gloo span
both hosts again."""
import pytest

pytestmark = pytest.mark.timeout(300)


def test_a_rank_killed_on_the_second_host_comes_back_there(two_hosts, capsys):
    ip, hostfile, _ = two_hosts
    assert ip.run_cell(f"%%mpirun --hostfile {hostfile} -np 4\nimport torch, torch.distributed as dist\n"
                       "dist.init_process_group('gloo')\nkept = rank * 10").success
    result = ip.run_cell("%%mpirun\nimport os, signal, time\ntime.sleep(0.3)\nif rank == 2:\n"
                         "    os.kill(os.getpid(), signal.SIGKILL)\ntime.sleep(30)")
    assert "died" in str(result.error_in_exec)
    capsys.readouterr()
    result = ip.run_cell("%mpirun --respawn")
    out = capsys.readouterr().out
    assert result.success, out
    assert "rank 2 (pid" in out and "started again" in out, out
    assert "torch's default group made again over all 4 ranks (gloo" in out, out
    assert ip.run_cell("%%mpirun -o after\nimport socket, torch, torch.distributed as dist\n"
                       "t = torch.ones(1) * (rank + 1)\ndist.all_reduce(t)\n"
                       "print(socket.gethostname(), comm.allreduce(rank), int(t.item()), "
                       "globals().get('kept'))").success, capsys.readouterr().out
    assert [r.stdout for r in ip.user_ns["after"]] == [
        "worker0 6 10 0\n", "worker0 6 10 10\n", "worker1 6 10 None\n", "worker1 6 10 30\n"]
