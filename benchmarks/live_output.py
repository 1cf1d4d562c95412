"""Live output of a streaming cell at N ranks: folded (the default) vs ``--no-fold``, same run.

One command: ``python benchmarks/live_output.py [--ranks 16,128] [--steps 20] [--interval 0.25] [--bars]``.
``--bars``: each rank draws a tqdm bar instead, one step per ``--interval`` (the bars' lines are
counted apart: ``bar_lines``).
Each rank prints a line per step (the loss, its rank and a timestamp: every line differs in its
numbers) and flushes it, ``--steps`` times ``--interval`` s apart: at 128 ranks, 512 lines a second.
Measured per N, in a terminal-like capture: the lines printed live while the cell runs, the lines of
the final summary, the kernel's CPU (this process: its IO thread parses every stream message) and
its RSS afterwards. The peer is our own exact output (``--no-fold``), which prints every line live
as ipyparallel's ``%%px --stream`` does (``%%px`` itself cannot start 128 ranks here: see scale.py).
Goal (issue 12): live lines bounded by the number of line templates, not by ranks x lines; the
kernel keeps up (its CPU well under the cell's wall time). Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time

import psutil

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

CELL = ("%%mpirun {options}\nimport time\nfor step in range({steps}):\n"
        "    print(f'step {{step}} loss {{0.5 + rank / 1000 + step / 100:.4f}} rank {{rank}} "
        "t {{time.time():.3f}}', flush=True)\n"
        "    time.sleep({interval})\n")
BARS = ("%%mpirun {options}\nimport time\nfrom tqdm import tqdm\n"
        "for step in tqdm(range({steps}), desc='epoch 0', mininterval=0):\n"
        "    time.sleep({interval})\n")


def measure(ip, options: str, steps: int, interval: float, cell: str = CELL) -> dict:
    me = psutil.Process()
    captured = io.StringIO()
    cpu, started = sum(me.cpu_times()[:2]), time.monotonic()
    with contextlib.redirect_stdout(captured):
        ip.run_cell(cell.format(options=options, steps=steps, interval=interval))
    cpu, wall = sum(me.cpu_times()[:2]) - cpu, time.monotonic() - started
    out = captured.getvalue()
    head = out.find("----------------")
    head = len(out) if head < 0 else head
    return {"wall_s": round(wall, 2), "kernel_cpu_s": round(cpu, 2),
            "live_lines": sum(1 for line in out[:head].splitlines() if line.startswith("[")),
            "bar_lines": sum(1 for line in out[:head].splitlines() if line.startswith("epoch")),
            "summary_lines": len(out[head:].splitlines()),
            "kernel_rss_mib": round(me.memory_info().rss / 2**20)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="16,128")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--bars", action="store_true")
    args = parser.parse_args()
    cell = BARS if args.bars else CELL
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_line_magic("load_ext", "mlp_magic")
    report = {}
    try:
        for np in (int(n) for n in args.ranks.split(",")):
            ip.run_cell(f"%%mpirun -np {np} --oversubscribe --restart\npass")
            folded = measure(ip, "", args.steps, args.interval, cell)
            exact = measure(ip, "--no-fold", args.steps, args.interval, cell)
            report[np] = {"folded": folded, "no_fold": exact}
            print(f"{np} ranks, {np * args.steps} lines: live lines {folded['live_lines']} vs "
                  f"{exact['live_lines']} (ratio {folded['live_lines'] / max(exact['live_lines'], 1):.4f}); "
                  f"summary lines {folded['summary_lines']} vs {exact['summary_lines']}; kernel CPU "
                  f"{folded['kernel_cpu_s']} vs {exact['kernel_cpu_s']} s in {folded['wall_s']} s; "
                  f"RSS {folded['kernel_rss_mib']} MiB", file=sys.stderr)
    finally:
        ip.run_line_magic("mpirun", "--stop")
    print(json.dumps({"benchmark": "live_output", "bars": args.bars, "steps": args.steps,
                      "interval_s": args.interval,
                      "results": report}))


if __name__ == "__main__":
    main()
