"""Time from a ``--timeout`` to the grouped stack report, for 4 and 8 ranks stuck in a barrier.

One command: ``python benchmarks/hang_report.py``. For each size, a World is started, rank 1
skips an ``MPI_Barrier`` the other ranks enter, and we time ``stack_snapshot`` (collect every
rank's stack, group, render) from the moment the timeout fires. The peer, measured on the
same stuck processes in the same run, is what people do by hand today: ``py-spy dump --pid``
for each rank (`pip install py-spy`; skipped with a note when absent). Goal: under 2 s.
Last line: one JSON object.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import time

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

ROUNDS = 3
STUCK_CELL = "if rank != 1:\n    comm.Barrier()\n"


def quiet(shell, cell: str):
    with contextlib.redirect_stdout(io.StringIO()):
        return shell.run_cell(cell)


def py_spy_all(pids: list) -> float | None:
    tool = shutil.which("py-spy")
    if not tool:
        return None
    started = time.perf_counter()
    for pid in pids:
        subprocess.run([tool, "dump", "--pid", str(pid)], capture_output=True, timeout=60)
    return time.perf_counter() - started


def measure(shell, np: int) -> dict:
    from mlp_magic.world import command, stacks
    from mlp_magic.world.cell import CellRun

    quiet(shell, "%mpirun --stop")
    quiet(shell, f"%%mpirun -np {np}\npass")
    world = command.current_world()
    run = CellRun(world, STUCK_CELL, list(range(np)), "/tmp/mlp-magic-bench-hang")
    run.wait(1.0)  # the "timeout" fires now: ranks 0,2.. are in the barrier, rank 1 is idle
    ours, text = [], ""
    for _ in range(ROUNDS):
        started = time.perf_counter()
        text, _ = stacks.stack_snapshot(world, run.ranks)
        ours.append(time.perf_counter() - started)
    assert "comm.Barrier" in text or "--> cell, line 2" in text, text
    peer = py_spy_all([world.identities[r]["pid"] for r in run.ranks])
    quiet(shell, "%mpirun --stop")
    return {"ranks": np, "report_s": round(statistics.median(ours), 3),
            "peer_py_spy_s": None if peer is None else round(peer, 3),
            "ratio_vs_peer": None if peer is None else round(statistics.median(ours) / peer, 3)}


def main() -> None:
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    sizes = [measure(shell, np) for np in (4, 8)]
    for row in sizes:
        print(f"{row['ranks']} ranks: grouped stack report in {row['report_s']:.2f} s; "
              f"py-spy dump of each rank: {row['peer_py_spy_s']} s")
    figures = {"benchmark": "hang_report", "sizes": sizes, "goal": "report_s < 2",
               "meets_goal": all(row["report_s"] < 2 for row in sizes)}
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
