"""mpi4py's own test_datatype in a World against ``mpiexec -n 4``, in turns, same run.

One command: ``python benchmarks/mpi4py_datatype.py --tests DIR [--np 4] [--rounds 2]``, where DIR
is the ``test`` folder of mpi4py's source (the version installed: ``pip download
mpi4py==$(python -c 'import mpi4py; print(mpi4py.__version__)') --no-binary :all: --no-deps``,
then unpack). Both sides run the same code (``RUN``): the module's tests through unittest, timed
on each rank; a side's figure is its slowest rank. Ours is a ``%%mpirun -np N`` cell on a World
started beforehand (its start not counted); the peer is ``mpiexec -n N python -c RUN`` (its
Python's start not counted either: the timing is inside). Also per side: one pickle of
``MPI.DOUBLE`` (pickle looks for the object's module among all loaded ones: an engine's module
count shows here) and the modules loaded. Goal (issue 26): ours / peer <= 1.5. Last line: JSON.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
os.environ.update(OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl="self,sm,tcp", OMPI_MCA_pml="ob1")

GOAL = 1.5
RUN = """
import io, json, pickle, sys, time, unittest
sys.path.insert(0, {tests!r})
from mpi4py import MPI
import test_datatype
began = time.perf_counter()
for _ in range(1000):
    pickle.dumps(MPI.DOUBLE)
pickle_ms = time.perf_counter() - began   # 1000 pickles: seconds = ms per pickle
suite = unittest.defaultTestLoader.loadTestsFromModule(test_datatype)
began = time.perf_counter()
result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
print("DATATYPE " + json.dumps({{"rank": MPI.COMM_WORLD.rank, "s": time.perf_counter() - began,
      "tests": result.testsRun, "ok": result.wasSuccessful(), "pickle_ms": pickle_ms,
      "modules": len(sys.modules)}}))
"""


def parse(text: str) -> dict:
    """The slowest rank's figures out of every rank's DATATYPE line."""
    rows = [json.loads(line.split("DATATYPE ", 1)[1]) for line in text.splitlines() if "DATATYPE " in line]
    if not rows:
        raise RuntimeError(f"no result in: {text[-1500:]}")
    return {"s": round(max(r["s"] for r in rows), 2), "ranks": len(rows), "tests": rows[0]["tests"],
            "ok": all(r["ok"] for r in rows), "pickle_ms": round(max(r["pickle_ms"] for r in rows), 4),
            "modules": max(r["modules"] for r in rows)}


def peer(n: int, tests: str, mpiexec: str) -> dict:
    argv = [mpiexec, "-n", str(n), "--oversubscribe", sys.executable, "-c", RUN.format(tests=tests)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    return parse(done.stdout + done.stderr)


def ours(shell, n: int, tests: str) -> dict:
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        result = shell.run_cell(f"%%mpirun -np {n} -o datatype_run\n" + RUN.format(tests=tests))
    if not result.success:
        raise RuntimeError(sink.getvalue()[-2000:])
    return parse("".join(r.stdout for r in shell.user_ns["datatype_run"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", required=True, help="mpi4py's source test folder")
    parser.add_argument("--np", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="peer and ours, in turns")
    options = parser.parse_args()
    tests = os.path.abspath(options.tests)
    os.environ.setdefault("MLP_MAGIC_HOME", tempfile.mkdtemp(prefix="mlp-datatype-"))
    from IPython.testing.globalipapp import start_ipython

    from mlp_magic.world.start.mpi import find_mpiexec

    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    runs = {"peer": [], "ours": []}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            shell.run_cell(f"%%mpirun -np {options.np}\npass")   # the World's start, not counted
        for turn in range(options.rounds):
            runs["peer"].append(peer(options.np, tests, find_mpiexec()))
            runs["ours"].append(ours(shell, options.np, tests))
            last = {side: found[-1]["s"] for side, found in runs.items()}
            print(f"round {turn + 1}: peer {last['peer']} s, ours {last['ours']} s", flush=True)
    finally:
        shell.run_line_magic("mpirun", "--stop")
    median = {side: statistics.median(r["s"] for r in found) for side, found in runs.items()}
    ratio = round(median["ours"] / median["peer"], 3)
    print(f"test_datatype at {options.np} ranks: ours {median['ours']:.1f} s, "
          f"mpiexec {median['peer']:.1f} s, "
          f"ratio {ratio} (goal <= {GOAL}: {'pass' if ratio <= GOAL else 'FAIL'}); one pickle of MPI.DOUBLE: "
          f"ours {runs['ours'][-1]['pickle_ms']:.3f} ms, mpiexec {runs['peer'][-1]['pickle_ms']:.3f} ms")
    import mlp_magic

    print(json.dumps({"benchmark": "mpi4py_datatype", "np": options.np, "ratio": ratio, "goal": GOAL,
                      "median_s": median, "runs": runs, "mlp_magic": os.path.dirname(mlp_magic.__file__)}))


if __name__ == "__main__":
    main()
