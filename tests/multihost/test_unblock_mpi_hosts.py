"""Issue 31 across hosts: a rank stuck in an MPI call is freed through ULFM (Open MPI 5 over ob1,
on by default there), although its message waits on a rank that is not stuck: over TCP that
rank's connection completes only when it runs MPI's progress, which the unblock drives: the
kernel's ``%mpirun --unblock`` through a job, the panel's Unblock (its kernel may be stuck in
the cell) through a signal to the idle rank's side thread, via the other host's agent."""
import asyncio
import time

import pytest

from mlp_magic.core.ranges import parse_ranks
from mlp_magic.panel import actions
from tests import worlds
from tests.timing import hang_bound

pytestmark = pytest.mark.timeout(300)

HANG = "%%mpirun --timeout 4\nif rank != 1:\n    comm.Barrier()\n"


def _hang_across_hosts(two_hosts, capsys, monkeypatch):
    ip, hostfile, _ = two_hosts
    monkeypatch.setenv("OMPI_MCA_pml", "ob1")   # the PML that carries the revocation (not UCX's)
    monkeypatch.delenv("OMPI_MCA_mpi_ft_enable", raising=False)   # the World's default, not the user's
    assert ip.run_cell(f"%%mpirun --hostfile {hostfile} -np 4\nheld = rank * 3\n").success
    hung = ip.run_cell(HANG)
    assert "timeout on ranks 0,2-3" in str(hung.error_in_exec), capsys.readouterr().out
    capsys.readouterr()
    return ip


def _state_kept_and_comm_usable(ip) -> None:
    assert ip.run_cell("%%mpirun -o after\nprint(comm.allreduce(rank), held)").success
    assert [r.stdout for r in ip.user_ns["after"]] == [f"6 {3 * r}\n" for r in range(4)]


def test_a_rank_stuck_in_mpi_on_another_host_comes_free_with_its_state(two_hosts, capsys, monkeypatch):
    ip = _hang_across_hosts(two_hosts, capsys, monkeypatch)
    started = time.monotonic()
    assert ip.run_cell("%mpirun --unblock").success
    said, took = capsys.readouterr().out, time.monotonic() - started
    assert "ranks 0,2-3 came free in" in said, said   # rank 3 on worker1 waited on idle rank 1
    assert ("the World's MPI communicator was revoked to end the stuck MPI call (Open MPI v5" in said
            and "`comm` now names a new one of the same 4 ranks" in said), said
    assert took < hang_bound(2), said
    _state_kept_and_comm_usable(ip)


def test_the_panels_unblock_frees_it_too_without_the_kernel(two_hosts, capsys, monkeypatch):
    """As the server does it, from the World's record: every rank free with no kernel call; the
    kernel's next use of the World makes the communicator again."""
    ip = _hang_across_hosts(two_hosts, capsys, monkeypatch)
    world = worlds.current_world()
    started = time.monotonic()
    answer = asyncio.run(actions.unblock(world.state(), current=world.state))
    assert (answer["signalled"], answer["problems"]) == ("0,2-3", {}), answer
    # with those that came free within the second
    driven = set(parse_ranks(answer["progressed"], 4)) if answer["progressed"] else set()
    assert 1 in driven and 3 not in driven, answer   # rank 3 on worker1 waits on rank 1

    def busy() -> list:
        return [row["rank"] for row in world.state()["ranks"] if row["state"] == "busy"]

    while busy() and time.monotonic() - started < hang_bound(2):
        time.sleep(0.05)
    took = time.monotonic() - started
    assert not busy(), f"ranks {busy()} still busy {took:.1f} s after the panel's Unblock"
    _state_kept_and_comm_usable(ip)   # a plain next cell: the communicator is made first
    said = capsys.readouterr().out
    assert "the World's MPI communicator was revoked to end the stuck MPI call" in said, said
