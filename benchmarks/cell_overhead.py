"""Cell overhead on 4 warm local ranks; one command: ``python benchmarks/cell_overhead.py``.

1. Median round trip of a ``pass`` cell through ``%%mpirun`` vs ipyparallel's own ``%%px`` on
   the very same engines, interleaved so both see the same machine load. Goal: ratio <= 1.0.
2. A warm cell doing ``import torch; torch.ones(1)`` vs launching ``mpiexec -n 4 python cell.py``
   for the same code (what you pay without persistent ranks). Goal: >= 50x faster.
Last line: one JSON object.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

NP = 4
PASS_ROUNDS = 60
TORCH_ROUNDS = 10
MPIEXEC_ROUNDS = 3
TORCH_CELL = "import torch\nx = torch.ones(1)\n"


def timed_cell(shell, cell: str) -> float:
    sink = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(sink):
        result = shell.run_cell(cell)
    elapsed = time.perf_counter() - started
    if not result.success:
        raise SystemExit(f"cell failed: {cell!r}\n{sink.getvalue()[-2000:]}")
    return elapsed


def mpiexec_round(script: str) -> float:
    from mlp_magic.world.start.mpi import FAST_LOCAL_OMPI, find_mpiexec

    env = dict(os.environ, **FAST_LOCAL_OMPI)
    argv = [find_mpiexec(), "-n", str(NP), "--oversubscribe", sys.executable, script]
    started = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    from IPython.testing.globalipapp import start_ipython

    from mlp_magic.world.owner import owner_of

    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    timed_cell(shell, f"%%mpirun -np {NP}\npass")  # start the World
    world = owner_of(shell).world
    view = world.client[:]
    view.activate()  # registers %%px on the same engines
    for _ in range(5):  # warm both paths
        timed_cell(shell, "%%mpirun\npass")
        timed_cell(shell, "%%px --block\npass")

    ours, peer = [], []
    for _ in range(PASS_ROUNDS):
        ours.append(timed_cell(shell, "%%mpirun\npass"))
        peer.append(timed_cell(shell, "%%px --block\npass"))

    timed_cell(shell, "%%mpirun\n" + TORCH_CELL)  # first import is the cold one
    warm_torch = [timed_cell(shell, "%%mpirun\n" + TORCH_CELL) for _ in range(TORCH_ROUNDS)]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write(TORCH_CELL)
    try:
        fresh = [mpiexec_round(script.name) for _ in range(MPIEXEC_ROUNDS)]
    finally:
        os.unlink(script.name)
    shell.run_line_magic("mpirun", "--stop")

    figures = {
        "benchmark": "cell_overhead",
        "ranks": NP,
        "pass_mpirun_median_s": round(statistics.median(ours), 5),
        "pass_px_median_s": round(statistics.median(peer), 5),
        "pass_ratio_vs_px": round(statistics.median(ours) / statistics.median(peer), 3),
        "torch_warm_cell_median_s": round(statistics.median(warm_torch), 5),
        "torch_fresh_mpiexec_median_s": round(statistics.median(fresh), 4),
        "torch_speedup_vs_mpiexec": round(statistics.median(fresh) / statistics.median(warm_torch), 1),
        "goals": {"pass_ratio_vs_px": "<= 1.0", "torch_speedup_vs_mpiexec": ">= 50"},
    }
    figures["meets_goals"] = figures["pass_ratio_vs_px"] <= 1.0 and figures["torch_speedup_vs_mpiexec"] >= 50
    print(f"%%mpirun pass cell: {figures['pass_mpirun_median_s'] * 1e3:.1f} ms median, "
          f"%%px: {figures['pass_px_median_s'] * 1e3:.1f} ms (ratio {figures['pass_ratio_vs_px']})")
    print(f"warm torch cell: {figures['torch_warm_cell_median_s'] * 1e3:.1f} ms, fresh mpiexec: "
          f"{figures['torch_fresh_mpiexec_median_s']:.2f} s (x{figures['torch_speedup_vs_mpiexec']})")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
