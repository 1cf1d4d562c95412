"""A rank that cannot set itself up (issue 24, "one-line start errors"): the user reads one line
naming the rank, its host and the cause, not a RemoteError's traceback, soon after the failure
(not at the start's deadline, while the other ranks wait in MPI_Init), and the World is stopped.
Real mpiexec, real engines; the container's breakage is a module on PYTHONPATH."""
from __future__ import annotations

import time

import pytest

from mlp_magic.errors import MlpMagicError
from tests import worlds

from tests.integration.conftest import run

pytestmark = pytest.mark.timeout(240)

# Stands in for a container's broken mpi4py: the ranks named by BROKEN_RANKS fail to import it
# (the others get the real one).
FAKE_MPI4PY = """
import os
if os.environ.get("OMPI_COMM_WORLD_RANK") in os.environ["BROKEN_RANKS"].split(","):
    raise {error}
import sys
sys.path.remove(os.path.dirname(os.path.abspath(__file__)))
del sys.modules["mpi4py"]
import mpi4py as _real
sys.modules[__name__] = _real
"""


@pytest.mark.parametrize("broken,error,line", [
    ("1", 'ImportError("libmpi.so.40: cannot open shared object file: No such file or directory")',
     "rank 1 on localhost: ImportError: libmpi.so.40: cannot open shared object file: No such file "
     "or directory"),
    ("0,1,2", 'ModuleNotFoundError("No module named \'mpi4py\'")',
     "ranks 0-2 (3) on localhost: ModuleNotFoundError: No module named 'mpi4py'"),
])
def test_a_rank_that_cannot_set_up_is_one_line(no_world, ip, tmp_path, monkeypatch, capsys, broken, error,
                                               line):
    (tmp_path / "mpi4py.py").write_text(FAKE_MPI4PY.format(error=error))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("BROKEN_RANKS", broken)
    capsys.readouterr()
    started = time.monotonic()
    failed = run(ip, "%%mpirun -np 3 --oversubscribe\nprint('never')")
    took = time.monotonic() - started
    assert isinstance(failed, MlpMagicError)
    message = str(failed)
    assert "\n" not in message
    assert message.startswith("the World did not start: the set-up (variables, MPI_Init, hooks) failed on "
                              + line + "; logs in ")
    shown = capsys.readouterr()
    assert "RemoteError" not in shown.out + shown.err and "Traceback" not in shown.out + shown.err
    assert worlds.current_world() is None
    # Not the start's limit (over 60 s for 3 ranks): the rank's failure ends the wait.
    assert took < 45, took


# A container whose ipyparallel cannot be imported on one rank: that rank's Python dies before its
# engine logs anything, and mpiexec ends the job.
FAKE_IPYPARALLEL = """
import os
if os.environ.get("OMPI_COMM_WORLD_RANK") == "1":
    raise ImportError("libzmq.so.5: cannot open shared object file: No such file or directory")
import sys
sys.path.remove(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
del sys.modules["ipyparallel"]
import ipyparallel as _real
sys.modules[__name__] = _real
"""


def test_a_rank_that_dies_before_registering_is_named_with_its_last_words(no_world, ip, tmp_path,
                                                                          monkeypatch):
    (tmp_path / "ipyparallel").mkdir()
    (tmp_path / "ipyparallel" / "__init__.py").write_text(FAKE_IPYPARALLEL)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    failed = run(ip, "%%mpirun -np 2 --oversubscribe\nprint('never')")
    assert isinstance(failed, MlpMagicError)
    message = str(failed)
    assert "\n" not in message
    assert message.startswith("the engines did not start: rank 1 on localhost: ImportError: libzmq.so.5: "
                              "cannot open shared object file: No such file or directory (mpiexec ")
    # under ULFM the launcher outlives each death: it ends with 1 or 0, as its ranks' ends fall
    launcher_end = message.split(" (mpiexec ")[1].split("); logs in ")[0]
    assert launcher_end in ("exited with status 1", "ended with its ranks"), message
    assert worlds.current_world() is None
