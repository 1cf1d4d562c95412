"""Naming the first rank to die from launcher logs (text captured from OpenMPI 5 and MPICH runs)."""
from mlp_magic.world.pure.deaths import death_note, first_dead_rank

OPENMPI_EXIT = """\
2026-11-21 11:13:23.506 [rank 3] [IPEngine.3] CRITICAL | received signal 15, stopping
--------------------------------------------------------------------------
prterun detected that one or more processes exited with non-zero status,
thus causing the job to be terminated. The first process to do so was:

   Process name: [prterun-vm-5416@1,2]
   Exit code:    3
--------------------------------------------------------------------------
"""
OPENMPI_SIGNAL = """\
--------------------------------------------------------------------------
prterun noticed that process rank 1 with PID 6033 on node vm exited on
signal 11 (Segmentation fault).
--------------------------------------------------------------------------
"""
MPICH_SIGNAL = """\
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   RANK 3 PID 812 RUNNING AT worker1
=   KILLED BY SIGNAL: 9 (Killed)
===================================================================================
"""
PID_OF_RANK = {0: 5460, 1: 5461, 2: 5459, 3: 5462}


def test_openmpi_names_the_first_failing_process_over_what_the_ranks_saw():
    assert first_dead_rank(OPENMPI_EXIT, exited_ranks=[0, 3]) == 2


def test_openmpi_signal_death_names_the_rank():
    assert first_dead_rank(OPENMPI_SIGNAL) == 1


def test_mpich_names_the_rank():
    assert first_dead_rank(MPICH_SIGNAL) == 3


def test_without_a_launcher_the_lowest_exited_rank_is_named():
    assert first_dead_rank("", exited_ranks={3, 2}) == 2
    assert first_dead_rank("", exited_ranks=()) is None


def test_the_note_names_rank_pid_host_and_the_launcher_lines():
    note = death_note(OPENMPI_EXIT, (), PID_OF_RANK, lambda rank: f"worker{rank // 2}")
    assert note.startswith("rank 2 (pid 5459 on worker1) died first during the cell")
    assert "Exit code:    3" in note and "%mpirun --restart" in note
    assert death_note("", (), PID_OF_RANK, str).startswith("a rank's process exited")
    assert death_note("", [1], PID_OF_RANK, str).startswith("rank 1 (pid 5461 on 1) died first")


# Open MPI 5.0.11's launcher under `--with-ft ulfm --prtemca errmgr_base_verbose 5`: the job goes
# on and says how each rank ended (captured here: SIGKILL, os._exit(3), os._exit(0)).
ULFM_LOG = """\
[vm:06464] [prterun-vm-6464@0,0] errmgr:dvm: for proc [prterun-vm-6464@1,2] state ABORTED BY SIGNAL
[vm:06464] [prterun-vm-6464@0,0] errmgr:dvm: proc [prterun-vm-6464@1,2] aborted by signal
[vm:06258] [prterun-vm-6258@0,0] errmgr:dvm: for proc [prterun-vm-6258@1,12] state EXITED WITH NON-ZERO STATUS
[vm:06258] [prterun-vm-6258@0,0] errmgr:dvm: proc [prterun-vm-6258@1,12] exited with non-zero status 3
[vm:06569] [prterun-vm-6569@0,0] errmgr:dvm: for proc [prterun-vm-6569@1,0] state TERMINATED WITHOUT SYNC
[vm:06569] [prterun-vm-6569@0,0] errmgr:dvm: proc [prterun-vm-6569@1,0] terminated without sync
[vm:06569] [prterun-vm-6569@0,0] errmgr:dvm: proc [prterun-vm-6569@1,2] exited with non-zero status 1
[vm:13740] [prterun-vm-13740@0,0] errmgr:dvm: proc [prterun-vm-13740@2,5] aborted by signal
"""   # the last: a process a cell spawned (job 2), not rank 5


def test_ulfm_deaths_names_each_failed_rank_once_with_how_it_ended():
    from mlp_magic.world.pure.deaths import ulfm_deaths

    assert ulfm_deaths(ULFM_LOG) == {2: "was killed by a signal", 12: "exited with status 3",
                                     0: "ended (status 0) without finishing MPI"}
    assert ulfm_deaths(OPENMPI_EXIT + OPENMPI_SIGNAL + MPICH_SIGNAL) == {}   # no job goes on there


def test_ulfm_failures_names_spawned_processes_by_job_and_index():
    from mlp_magic.world.pure.deaths import ulfm_failures

    found = ulfm_failures(ULFM_LOG)
    assert found[(2, 5)] == "was killed by a signal" and found[(1, 2)] == "was killed by a signal"
    assert len(found) == 4


def test_the_survivors_note_warns_only_where_the_others_mpi_never_heard():
    from mlp_magic.world.pure.deaths import survivors_note

    def host(rank):
        return "vm"

    killed = survivors_note({2: "was killed by a signal"}, 3, PID_OF_RANK, host)
    assert killed == ("rank 2 (pid 5459 on vm) was killed by a signal during the cell; the other 3 "
                      "ranks kept their state and run the next cells without rank 2 "
                      "(`%mpirun --respawn` brings it back)")
    both = survivors_note({1: "exited with status 3", 3: "ended (status 0) without finishing MPI",
                           0: "exited with status 1"}, 1, PID_OF_RANK, host)
    assert both.startswith("rank 0 (pid 5460 on vm) exited with status 1; rank 1 (pid 5461 on vm) "
                           "exited with status 3; rank 3 (pid 5462 on vm) ended (status 0) without "
                           "finishing MPI during the cell; the other 1 ranks")
    assert both.endswith("; Open MPI does not tell the other ranks of a non-zero exit, so an MPI "
                         "call with ranks 0-1 would hang")


def test_a_collective_without_a_dead_rank_is_named_once_and_only_then():
    from mlp_magic.world.pure.deaths import collective_without_note

    mpi = "Exception: MPI_ERR_PROC_FAILED: Process Failure"
    gloo = "DistBackendError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer"
    note = collective_without_note([2], [mpi, ""])
    assert note.startswith("rank 2 is dead: a collective over every rank (MPI's COMM_WORLD, torch's "
                           "default group) fails without it;")
    assert "ranks 0,3 are dead" in collective_without_note([3, 0], [gloo]) and "without them" in \
        collective_without_note([0, 3], [gloo])
    assert collective_without_note([2], ["ZeroDivisionError: division by zero"]) == ""   # not about it
    assert collective_without_note([], [mpi]) == ""
