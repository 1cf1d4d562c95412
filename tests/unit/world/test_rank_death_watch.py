"""world/rank_deaths.RankDeathWatch on a real file the way the launcher writes it: lines
appended over time, one cut in the middle by a read, the same rank named twice, a spawned
process's death (job 2) among them."""
import threading

from mlp_magic.world.rank_deaths import RankDeathWatch
from tests.timing import wait_until

PREFIX = "[vm:06464] [prterun-vm-6464@0,0] errmgr:dvm: "
KILLED_2 = PREFIX + "proc [prterun-vm-6464@1,2] aborted by signal\n"
EXITED_3 = PREFIX + "proc [prterun-vm-6464@1,3] exited with non-zero status 7\n"
SPAWNED_0 = PREFIX + "proc [prterun-vm-6464@2,0] aborted by signal\n"


def test_each_dead_rank_is_told_once_as_the_log_grows_even_across_a_cut_line(tmp_path):
    log = tmp_path / "mpiexec.log"
    log.write_text("[1,0]<stdout>: alive\n")
    told, lock = [], threading.Lock()

    def on_deaths(new):
        with lock:
            told.append(dict(new))

    watch = RankDeathWatch(str(log), on_deaths)
    try:
        with open(log, "a") as out:
            out.write(KILLED_2[:30])   # the launcher's line, half written when the watch reads
            out.flush()
            watch.look()
            out.write(KILLED_2[30:] + SPAWNED_0)
            out.flush()
            assert wait_until(lambda: told, 5)
            out.write(KILLED_2 + EXITED_3)   # rank 2 again (its other line), and rank 3
            out.flush()
            assert wait_until(lambda: len(told) == 2, 5)
    finally:
        watch.close()
    assert told == [{2: "was killed by a signal"}, {3: "exited with status 7"}]


def test_a_missing_log_tells_nothing_and_close_ends_the_thread(tmp_path):
    told = []
    watch = RankDeathWatch(str(tmp_path / "never.log"), told.append)
    watch.look()
    watch.close()
    assert not watch._thread.is_alive() and told == []


def test_a_respawned_ranks_death_is_told_as_that_rank_and_each_process_once(tmp_path):
    """A rank %mpirun --respawn started is job 2's process 0 in the launcher's log: told as the
    rank it stands for once the World maps it; rank 2's first death does not hide its second."""
    log = tmp_path / "mpiexec.log"
    log.write_text(KILLED_2)
    told, spawned = [], {}
    watch = RankDeathWatch(str(log), told.append, spawned)
    try:
        assert wait_until(lambda: told == [{2: "was killed by a signal"}], 5)
        spawned[(2, 0)] = 2   # the World took job 2's process 0 as rank 2
        with open(log, "a") as out:
            out.write(SPAWNED_0)
        assert wait_until(lambda: len(told) == 2, 5)
    finally:
        watch.close()
    assert told[1] == {2: "was killed by a signal"}
