"""Issue 31 across hosts: a rank stuck in an MPI call is freed through ULFM (Open MPI 5 over ob1,
on by default there), although its message waits on a rank that is not stuck: over TCP that
rank's connection completes only when it runs MPI's progress, which the unblock drives."""
import time

import pytest

from tests.timing import hang_bound

pytestmark = pytest.mark.timeout(300)

HANG = "%%mpirun --timeout 4\nif rank != 1:\n    comm.Barrier()\n"


def test_a_rank_stuck_in_mpi_on_another_host_comes_free_with_its_state(two_hosts, capsys, monkeypatch):
    ip, hostfile, _ = two_hosts
    monkeypatch.setenv("OMPI_MCA_pml", "ob1")   # the PML that carries the revocation (not UCX's)
    monkeypatch.delenv("OMPI_MCA_mpi_ft_enable", raising=False)   # the World's default, not the user's
    assert ip.run_cell(f"%%mpirun --hostfile {hostfile} -np 4\nheld = rank * 3\n").success
    hung = ip.run_cell(HANG)
    assert "timeout on ranks 0,2-3" in str(hung.error_in_exec), capsys.readouterr().out
    capsys.readouterr()
    started = time.monotonic()
    assert ip.run_cell("%mpirun --unblock").success
    said, took = capsys.readouterr().out, time.monotonic() - started
    assert "ranks 0,2-3 came free in" in said, said   # rank 3 on worker1 waited on idle rank 1
    assert ("the World's MPI communicator was revoked to end the stuck MPI call (Open MPI v5" in said
            and "`comm` now names a new one of the same 4 ranks" in said), said
    assert took < hang_bound(2), said
    assert ip.run_cell("%%mpirun -o after\nprint(comm.allreduce(rank), held)").success
    assert [r.stdout for r in ip.user_ns["after"]] == [f"6 {3 * r}\n" for r in range(4)]
