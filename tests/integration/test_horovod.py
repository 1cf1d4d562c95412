"""Horovod in a World: a rank gets what ``horovodrun`` gives it over MPI, an MPI process of the job,
so ``hvd.init()`` finds the ranks through MPI (mpi4py has initialised it, with the thread level
Horovod asks for). Horovod 0.28.1, its last release, is an sdist whose torch extension compiles as
C++14, and torch >= 2.1 needs C++17: it builds nowhere with a current torch, so this test runs only
where a Horovod build is installed, and its skip says why."""
import pytest

from tests.integration.conftest import run

pytest.importorskip("horovod.torch", reason="no Horovod build installs here: its last release (0.28.1) is "
                    "an sdist whose torch extension does not build against torch >= 2.1 (C++14; torch "
                    "needs C++17)")

INIT = """%%mpirun -o horovod_out
import horovod.torch as hvd
import torch
hvd.init()
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
print(hvd.rank(), hvd.size(), hvd.local_rank(), hvd.mpi_enabled(), float(total))
"""


@pytest.mark.slow
def test_hvd_init_finds_every_rank_through_mpi_and_reduces(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, INIT) is None, capsys.readouterr().out[-3000:]
    printed = [r.stdout.split() for r in ip.user_ns["horovod_out"]]
    assert printed == [[str(rank), "4", str(rank), "True", "10.0"] for rank in range(4)], printed
