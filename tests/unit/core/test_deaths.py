"""Naming the first rank to die from launcher logs (text captured from OpenMPI 5 and MPICH runs)."""
from mlp_magic.core.deaths import death_note, first_dead_rank

OPENMPI_EXIT = """\
2026-11-21 11:13:23.506 [KernelNanny.3] Pipe closed, parent 5459 has status: zombie
2026-11-21 11:13:24.018 [KernelNanny.1] Parent 5460 exited with status None.
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
# Remote hosts' lines arrive late: the first nanny line may be another rank's, or only "Pipe closed".
NANNIES_ONLY = """\
2026-11-21 11:13:23.506 [KernelNanny.3] Pipe closed, parent 5459 has status: zombie
2026-11-21 11:13:24.018 [KernelNanny.1] Parent 5460 exited with status None.
"""
RANK_OF_PID = {5460: 0, 5461: 1, 5459: 2, 5462: 3}


def test_openmpi_names_the_first_failing_process_over_the_nannies():
    assert first_dead_rank(OPENMPI_EXIT, RANK_OF_PID) == 2


def test_openmpi_signal_death_names_the_rank():
    assert first_dead_rank(OPENMPI_SIGNAL, RANK_OF_PID) == 1


def test_mpich_names_the_rank():
    assert first_dead_rank(MPICH_SIGNAL, RANK_OF_PID) == 3


def test_without_the_launcher_the_first_nanny_line_of_either_kind_counts():
    assert first_dead_rank(NANNIES_ONLY, RANK_OF_PID) == 2
    assert first_dead_rank("[KernelNanny.0] Parent 99 exited with status 0.", RANK_OF_PID) is None


def test_the_note_names_rank_pid_host_and_the_launcher_lines():
    note = death_note(OPENMPI_EXIT, RANK_OF_PID, lambda rank: f"worker{rank // 2}")
    assert note.startswith("rank 2 (pid 5459 on worker1) died first during the cell")
    assert "Exit code:    3" in note and "%mpirun --restart" in note
    assert death_note("", RANK_OF_PID, str).startswith("a rank's process exited")
