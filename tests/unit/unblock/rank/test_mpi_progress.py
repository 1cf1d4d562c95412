"""The idle ranks' part in ending a stuck MPI call across hosts (unblock/rank/mpi_world): where
there is nothing to wait for, it returns at once, so that a torch hang's unblock never waits on
it; where mpi4py runs with ULFM, it runs MPI's progress until the revocation came (a real
``mpiexec`` of one rank here; across hosts: tests/multihost/test_unblock_mpi_hosts)."""
import os
import subprocess
import sys
import time

from mlp_magic.unblock.rank import mpi_world
from mlp_magic.world.start.mpi import find_mpiexec
from tests.timing import hang_bound


def test_without_ulfm_or_mpi4py_it_returns_at_once(monkeypatch):
    monkeypatch.delenv(mpi_world.FT_VARIABLE, raising=False)
    began = time.monotonic()
    assert mpi_world.progress_until_revoked(30.0) is False
    assert time.monotonic() - began < 0.5


RANK = """
import sys, time
from mpi4py import MPI
from mlp_magic.unblock.rank import mpi_world
from mlp_magic.world.start.mpi import find_mpiexec
began = time.monotonic()
quiet = mpi_world.progress_until_revoked(0.5)
quiet_s = time.monotonic() - began
MPI.COMM_WORLD.Revoke()
began = time.monotonic()
seen = mpi_world.progress_until_revoked(30.0, after_s=0.1)
print(quiet, round(quiet_s, 2), seen, round(time.monotonic() - began, 2))
"""


def test_with_ulfm_it_runs_until_the_revocation_then_a_moment_more():
    mpiexec = find_mpiexec()   # Open MPI 5 from PyPI (scripts/test-setup.sh)
    env = dict(os.environ, OMPI_MCA_mpi_ft_enable="1", OMPI_MCA_pml="ob1", OMPI_MCA_btl="self,sm,tcp",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run([mpiexec, "-n", "1", sys.executable, "-c", RANK], env=env, capture_output=True,
                          text=True, timeout=hang_bound(10))
    assert done.returncode == 0, done.stderr[-2000:]
    quiet, quiet_s, seen, seen_s = done.stdout.split()
    assert quiet == "False" and 0.5 <= float(quiet_s) < 2.0   # no revocation: its bound
    assert seen == "True" and 0.1 <= float(seen_s) < 2.0      # revoked: a moment more, not 30 s


TWO_RANKS = """
import os, sys, time
import mpi4py
mpi4py.rc.thread_level = sys.argv[2]
from mpi4py import MPI
from mlp_magic.engine.side_signal import PROGRESS_SIGNAL
from mlp_magic.unblock.rank import mpi_world
assert mpi_world.install_progress()
comm = MPI.COMM_WORLD
comm.Barrier()
if comm.rank == 1:
    if sys.argv[1] == "signal":
        os.kill(os.getpid(), PROGRESS_SIGNAL)
    time.sleep(1.5)   # no MPI call on the main thread meanwhile
    print("revoked", comm.Is_revoked(), flush=True)
else:
    time.sleep(0.3)
    comm.Revoke()
    time.sleep(1.5)
"""


def test_the_progress_signal_lets_an_idle_rank_take_the_revocation():
    """The panel's Unblock: an idle rank's main thread calls no MPI, so a revocation from another
    rank does not reach it (the control, without the signal); with the signal, its side thread
    runs MPI's progress and it does, and the process lives on. Only under MPI_THREAD_MULTIPLE,
    which lets two threads call MPI at once: under a lower level the signal does nothing."""
    mpiexec = find_mpiexec()
    env = dict(os.environ, OMPI_MCA_mpi_ft_enable="1", OMPI_MCA_pml="ob1", OMPI_MCA_btl="self,sm,tcp",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    said = {}
    for asked, level in (("signal", "multiple"), ("none", "multiple"), ("signal", "serialized")):
        done = subprocess.run([mpiexec, "-n", "2", sys.executable, "-c", TWO_RANKS, asked, level], env=env,
                              capture_output=True, text=True, timeout=hang_bound(20))
        assert done.returncode == 0, done.stderr[-2000:]
        said[asked, level] = done.stdout.strip()
    assert said == {("signal", "multiple"): "revoked True", ("none", "multiple"): "revoked False",
                    ("signal", "serialized"): "revoked False"}, said
