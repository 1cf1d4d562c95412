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
