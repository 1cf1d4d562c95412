"""``%mpirun --unblock`` (issue 31) on a real 4-rank World: a real gloo process group, a real
hung all_reduce, the ranks' state kept across it."""
import re
import time

import pytest

from mlp_magic.agent import signals
from tests import worlds
from tests.integration.conftest import child_pids, run, timed_run
from tests.timing import hang_bound, wait_until

pytestmark = pytest.mark.timeout(300)

SETUP = """%%mpirun -np 4
import torch, torch.distributed as dist
dist.init_process_group("gloo")
pair = dist.new_group([0, 1])
state = torch.arange(3) * rank
loaded = list(range(rank * 1000))
"""
HANG = ("%%mpirun --timeout {seconds}\nt = torch.ones(2)\nif rank != 3:\n    dist.all_reduce(t)\n"
        "print('after')")
AFTER = ("%%mpirun -o after\nt = torch.tensor([float(rank)])\ndist.all_reduce(t)\n"
         "print(state.tolist(), len(loaded), int(t.item()))")


@pytest.fixture
def gloo_world(ip):
    """A 4-rank World whose ranks hold a gloo default group, a subgroup and some state; after
    the test, nothing of ours may linger."""
    run(ip, "%mpirun --stop")
    before = child_pids()
    assert run(ip, SETUP) is None
    yield ip
    run(ip, "%mpirun --stop")
    assert wait_until(lambda: not child_pids() - before), "processes left behind"


def _unfinished_ranks() -> list:
    """In the kernel: the ranks still running the World's last cell."""
    return worlds.current_world().busy_job.unfinished_ranks()


def _signal(targets: signals.Targets, op: str) -> tuple:
    """What ``signals.send`` does, from this process with targets read before (the kernel is busy
    with a cell then, as it may be when the panel's server signals the ranks)."""
    import asyncio

    return asyncio.run(signals.signal_all(targets, op))


def _hang_then_unblock(ip, capsys, seconds: int) -> tuple:
    error, _ = timed_run(ip, HANG.format(seconds=seconds))
    assert "timeout on ranks 0-2" in str(error)
    footer = capsys.readouterr().out
    started = time.monotonic()
    assert run(ip, "%mpirun --unblock") is None
    return footer, capsys.readouterr().out, time.monotonic() - started


def test_a_rank_skipping_an_all_reduce_is_unblocked_and_every_rank_keeps_its_state(gloo_world, capsys):
    ip = gloo_world
    footer, said, took = _hang_then_unblock(ip, capsys, 6)
    assert "`%mpirun --unblock` ends a hung torch.distributed collective" in footer
    assert "ranks 0-2 came free in" in said, said
    assert "the default process group was made again (gloo, 4 ranks) on ranks 0-3" in said
    assert "groups made with new_group are stale, make them again: group '1' (ranks 0-1)" in said
    assert took < hang_bound(2.0), said
    assert run(ip, AFTER) is None
    assert [r.stdout for r in ip.user_ns["after"]] == [f"{[0, r, 2 * r]} {r * 1000} 6\n" for r in range(4)]
    # A second hang on the group made again, a second unblock (a store prefix of its own).
    _, said, _ = _hang_then_unblock(ip, capsys, 3)
    assert "ranks 0-2 came free in" in said and "made again (gloo, 4 ranks)" in said, said
    assert run(ip, AFTER) is None
    assert [r.stdout for r in ip.user_ns["after"]] == [f"{[0, r, 2 * r]} {r * 1000} 6\n" for r in range(4)]


def test_a_refused_cell_points_to_unblock(gloo_world, capsys):
    ip = gloo_world
    timed_run(ip, HANG.format(seconds=3))
    refused = run(ip, "%%mpirun\nprint('queued?')")
    assert "ranks 0-2 are still running an earlier cell" in str(refused)
    assert "`%mpirun --unblock`" in str(refused) and "`%mpirun --restart`" in str(refused)
    assert run(ip, "%mpirun --unblock --ranks 3") is None   # rank 3 is not the one stuck
    assert "nothing to unblock: no rank of ranks 3 is still running a cell" in capsys.readouterr().out
    assert run(ip, "%mpirun --unblock") is None
    assert "ranks 0-2 came free" in capsys.readouterr().out


def test_unblock_with_nothing_hung_says_so_and_changes_nothing(gloo_world, capsys):
    ip = gloo_world
    assert run(ip, "%%mpirun -o group\nprint(id(dist.group.WORLD))") is None
    capsys.readouterr()
    assert run(ip, "%mpirun --unblock") is None
    assert capsys.readouterr().out.strip() == ("nothing to unblock: no rank is still running a cell; "
                                               "nothing was changed")
    assert run(ip, "%%mpirun -o again\nprint(id(dist.group.WORLD))") is None
    assert [r.stdout for r in ip.user_ns["again"]] == [r.stdout for r in ip.user_ns["group"]]
    assert run(ip, AFTER) is None


def test_unblock_after_the_panels_unblock_makes_the_group_again(gloo_world, capsys):
    """The panel's Unblock signals the ranks from the server (agent/signals, as here); the ranks
    come free, their group broken. ``--unblock`` then has nothing hung to end, and makes the
    group again instead of saying "nothing was changed"."""
    ip = gloo_world
    timed_run(ip, HANG.format(seconds=3))
    world = worlds.current_world()
    signalled, problems = signals.send(world, [0, 1, 2], "unblock")
    assert sorted(signalled) == [0, 1, 2] and problems == {}
    assert wait_until(lambda: not ip.call(_unfinished_ranks), hang_bound(2.0))
    capsys.readouterr()
    assert run(ip, "%mpirun --unblock") is None
    said = capsys.readouterr().out
    assert "the default process group was made again (gloo, 4 ranks) on ranks 0-3" in said, said
    assert "nothing to unblock" not in said
    assert run(ip, AFTER) is None


MPI_HANG = "%%mpirun --timeout 3\nif rank != 1:\n    comm.Barrier()\n"


@pytest.fixture
def mpi_world(ip):
    run(ip, "%mpirun --stop")
    before = child_pids()
    yield ip
    run(ip, "%mpirun --stop")
    assert wait_until(lambda: not child_pids() - before), "processes left behind"


def _mpi_unblock(ip, capsys) -> str:
    timed_run(ip, MPI_HANG)
    capsys.readouterr()
    assert run(ip, "%mpirun --unblock") is None
    said = capsys.readouterr().out
    assert "ranks 0,2-3 came free in" in said, said
    assert ("the World's MPI communicator was revoked to end the stuck MPI call (Open MPI v5" in said
            and "`comm` now names a new one of the same 4 ranks" in said), said
    return said


def test_a_rank_stuck_in_mpi_comes_free_through_ulfm_twice_and_torch_is_left_alone(mpi_world, capsys):
    """ULFM: the stuck MPI call ends, `comm` is a new communicator; the torch group of the same
    ranks is not touched (no gloo connection cut, no group made again); a second hang, on the new
    `comm`, ends too."""
    ip = mpi_world
    assert run(ip, "%%mpirun -np 4\nheld = [rank] * 1000\nimport torch, torch.distributed as dist\n"
                   "dist.init_process_group('gloo')\ngroup_id = id(dist.group.WORLD)\n") is None
    said = _mpi_unblock(ip, capsys)
    assert "default process group" not in said and "new_group" not in said, said
    check = ("%%mpirun -o after\nt = torch.ones(1)\ndist.all_reduce(t)\n"
             "same = id(dist.group.WORLD) == group_id\n"
             "print(comm.allreduce(rank), len(held), held[0], int(t.item()), same)")
    assert run(ip, check) is None
    assert [r.stdout for r in ip.user_ns["after"]] == [f"6 1000 {r} 4 True\n" for r in range(4)]
    _mpi_unblock(ip, capsys)   # stuck on the new `comm` this time
    assert run(ip, check) is None
    assert [r.stdout for r in ip.user_ns["after"]] == [f"6 1000 {r} 4 True\n" for r in range(4)]


def test_without_ulfm_a_rank_stuck_in_mpi_is_named_and_restart_offered(mpi_world, capsys, monkeypatch):
    ip = mpi_world
    monkeypatch.setenv("OMPI_MCA_mpi_ft_enable", "0")   # the user's choice wins over the World's default
    assert run(ip, "%%mpirun -np 4\npass") is None
    timed_run(ip, MPI_HANG)
    capsys.readouterr()
    started = time.monotonic()
    assert run(ip, "%mpirun --unblock") is None
    said = capsys.readouterr().out
    assert time.monotonic() - started < hang_bound(11)   # 10 s, more where ranks share cores
    assert "ranks 0,2-3 did not come free within 1" in said and "An MPI call cannot be ended" in said, said
    assert "`%mpirun --restart` starts the World again" in said and "nothing was made again" not in said
    assert run(ip, "%mpirun --restart") is None
    assert run(ip, "%%mpirun -o ok\nprint('works again')") is None


def test_when_some_ranks_come_free_and_others_cannot_each_is_said_with_its_own_time(
        mpi_world, capsys, monkeypatch):
    """Rank 0 hangs in gloo (its pair partner skipped), ranks 2-3 in an MPI barrier without ULFM:
    rank 0 comes free at once and is said so with its own time, not the 10 s the others took."""
    ip = mpi_world
    monkeypatch.setenv("OMPI_MCA_mpi_ft_enable", "0")
    assert run(ip, "%%mpirun -np 4\nimport torch, torch.distributed as dist\n"
                   "dist.init_process_group('gloo')\npair = dist.new_group([0, 1])\n") is None
    timed_run(ip, "%%mpirun --timeout 3\nif rank == 0:\n    dist.all_reduce(torch.ones(1), group=pair)\n"
                  "elif rank > 1:\n    comm.Barrier()\n")
    capsys.readouterr()
    assert run(ip, "%mpirun --unblock") is None
    said = capsys.readouterr().out
    freed = re.search(r"rank 0 came free in ([0-9.]+) s", said)
    assert freed and float(freed.group(1)) < 5, said
    assert "ranks 2-3 did not come free within 1" in said and "rank 2-3" not in said, said
    assert "nothing was made again (no new default process group, no new MPI communicator): ranks 2-3 " \
           "are still blocked" in said, said


def test_a_rank_running_python_that_gets_the_unblock_signal_keeps_its_mpi(mpi_world):
    """The panel's Unblock reaches any busy rank: one running Python (not stuck in a C call) must
    not be taken for a stuck MPI call (its COMM_WORLD revoked under the running cell)."""
    import threading

    ip = mpi_world
    assert run(ip, "%%mpirun -np 4\npass") is None
    targets = signals.Targets.of_world(worlds.current_world(), [0, 1])
    sent: list = []
    timer = threading.Timer(1.0, lambda: sent.append(_signal(targets, "unblock")))
    timer.start()
    busy = ("%%mpirun -o spun\nimport time\nbegan = time.time()\nwhile time.time() - began < 3:\n"
            "    sum(range(1000))\nprint(comm.allreduce(1))")
    try:
        assert run(ip, busy) is None
    finally:
        timer.join()
    assert sent and sorted(sent[0][0]) == [0, 1] and sent[0][1] == {}, sent   # the signal did reach them
    assert [r.stdout for r in ip.user_ns["spun"]] == ["4\n"] * 4
