"""A lean engine (issue 26): after a World's start no rank holds debugpy, pydevd, numpy, pynvml
or sqlite3, and what needs them still gets them when it asks; at a script's start a rank holds
at most ``BUDGET`` times the floor's modules (issue 43). Real mpiexec, real engines."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mlp_magic.gpu.nvml_probe import nvml_library_loads
from tests import worlds

from tests.integration.conftest import run

pytestmark = pytest.mark.timeout(240)
KEPT_OUT = ("debugpy", "pydevd", "_pydevd_bundle", "numpy", "sqlite3", "pynvml")
# IPython imports sqlite3 with its history module up to 9.16 (the floor is 8.0): with those, the
# history is off but the module is there; from 9.17 on it is imported only when a database opens.
SQLITE3_LAZY_SINCE = (9, 17)
# What an engine cannot do without (benchmarks/engine_weight.py's floor), and how many modules a
# rank may hold beyond it, as a multiple of it (issue 43: 556 against 497, the figure of
# docs/performance.md, "What an engine loads").
FLOOR = "import ipykernel.ipkernel, ipyparallel; from mpi4py import MPI"
BUDGET = 1.12


def kept_out_here() -> tuple:
    """What this engine should not hold, given the installed IPython and this host's NVML."""
    import IPython

    names = KEPT_OUT
    if tuple(int(part) for part in IPython.__version__.split(".")[:2]) < SQLITE3_LAZY_SINCE:
        names = tuple(n for n in names if n != "sqlite3")
    # The start's GPU probe asks for NVML on each host's first rank: only a host with the
    # driver's library may then hold pynvml, and this one's engines live on this host.
    return names if not nvml_library_loads() else tuple(n for n in names if n != "pynvml")


def loaded_of(names: tuple) -> list:
    """Runs on an engine (sent by value): which of ``names`` it holds, by top-level package."""
    import sys

    return sorted({name.partition(".")[0] for name in sys.modules} & set(names))


def _asked_of_every_rank(function, *args) -> dict:
    """Where the World's client is (the kernel): ``function(*args)`` on every rank."""
    world = worlds.current_world()
    results = {rank: world.client[engine].apply_async(function, *args)
               for rank, engine in world.rank_to_engine.items()}
    return {rank: result.get(timeout=60) for rank, result in results.items()}


def on_every_rank(ip, function, *args) -> dict:
    """``function(*args)`` on every rank of the session's World, asked from its kernel."""
    if hasattr(ip, "call"):   # a real kernel (tests/kernel.py): its World's client is there
        return ip.call(_asked_of_every_rank, function, *args)
    return _asked_of_every_rank(function, *args)


@pytest.fixture
def fresh_world(ip):
    """A World just started (the session's may have run cells that imported anything)."""
    run(ip, "%mpirun --stop")
    assert run(ip, "%%mpirun -np 4\npass") is None


def test_a_started_world_holds_nothing_heavy(ip, fresh_world):
    kept_out = kept_out_here()
    assert on_every_rank(ip, loaded_of, kept_out) == {rank: [] for rank in range(4)}


def floor_modules() -> list:
    """The modules of a bare Python that imports what an engine cannot do without."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", f"{FLOOR}\nimport sys\nprint(*sorted(sys.modules))"],
                          capture_output=True, text=True, timeout=120, env=env, check=True)
    return done.stdout.split()


# Run as `%mpirun script.py`: what the rank holds as the script's first line runs, written beside it.
COUNTING_SCRIPT = """import sys
_held = sorted(sys.modules)
import json, os
with open(os.path.join(os.path.dirname(__file__), "rank%s.json" % os.environ["RANK"]), "w") as _file:
    json.dump(_held, _file)
"""


def test_a_rank_holds_at_most_the_budget_of_modules_at_a_scripts_start(ip, fresh_world, tmp_path):
    """Each module a rank holds makes pickle slower in every cell (docs/performance.md): a
    module of ours that a rank imports at its start, or keeps after using it once, counts here.
    It was 551 against 497 (1.109x), then 570 (1.147x) with the unblock, collectives and
    breakpoint machinery imported at every rank's start."""
    script = tmp_path / "count_modules.py"
    script.write_text(COUNTING_SCRIPT)
    assert run(ip, f"%mpirun {script}") is None
    held = {rank: json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(4)}
    floor = floor_modules()
    counts = {rank: len(names) for rank, names in held.items()}
    fattest = max(counts, key=counts.get)
    beyond = sorted(set(held[fattest]) - set(floor))
    assert max(counts.values()) <= BUDGET * len(floor), (
        f"modules per rank {counts} against the floor's {len(floor)} (budget {BUDGET}x); "
        f"rank {fattest} holds beyond it: {' '.join(beyond)}")


def mpi_facts() -> dict:
    """Runs on an engine: where mpi4py.MPI sits among the modules, and MPI's state."""
    import pickle
    import sys

    from mpi4py import MPI

    return {"place": list(sys.modules).index("mpi4py.MPI"), "initialized": MPI.Is_initialized(),
            "thread": MPI.Query_thread() == MPI.THREAD_MULTIPLE,
            "pickled": pickle.loads(pickle.dumps([MPI.DOUBLE, MPI.SUM])) == [MPI.DOUBLE, MPI.SUM]}


def test_mpi_comes_first_and_is_initialised_as_mpi4py_does(ip, fresh_world):
    # pickle looks for MPI.DOUBLE's module through sys.modules in order: early is cheap (issue 26).
    # Under plain mpiexec it is the 73rd; after the version check's imports, the 163rd; after
    # ipykernel's and ipyparallel's, past the 520th.
    facts = on_every_rank(ip, mpi_facts)
    wrong = {rank: found for rank, found in facts.items()
             if not (found["place"] < 200 and found["initialized"] and found["thread"] and found["pickled"])}
    assert wrong == {}
    cell = ("%%mpirun -o reduced\n"
            "print(comm.allreduce(rank + 1), comm.bcast(MPI.DOUBLE if rank == 0 else 0) == MPI.DOUBLE)")
    assert run(ip, cell) is None
    assert {r.stdout for r in ip.user_ns["reduced"]} == {"10 True\n"}


def an_array():   # runs on an engine: numpy is loaded now, by the cell
    import numpy

    return numpy.full(3, 7)


def arrays_canned():   # the array's reply put numpy's canner back: arrays travel zero-copy
    import numpy
    from ipyparallel.serialize import canning

    return numpy.ndarray in canning.can_map


def test_what_needs_them_still_gets_them(ip, fresh_world):
    cell = """%%mpirun -o lean
import numpy as np
import debugpy
array = np.arange(5) * rank
print(array.sum(), len(In) > 0, debugpy.__name__)
"""
    assert run(ip, cell) is None
    assert [ip.user_ns["lean"][r].stdout for r in range(4)] == [f"{10 * r} True debugpy\n" for r in range(4)]
    assert [a.tolist() for a in on_every_rank(ip, an_array).values()] == [[7, 7, 7]] * 4
    assert set(on_every_rank(ip, arrays_canned).values()) == {True}
    assert on_every_rank(ip, loaded_of, ("numpy", "debugpy"))[0] == ["debugpy", "numpy"]
