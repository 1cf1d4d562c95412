"""``%%mpirun --profile`` against the same cell without it (the peer: no profiler), at N ranks, in
one real kernel.

One command: ``python benchmarks/profile.py [--ranks 1,4,16,64] [--repeat 3] [--long-seconds 60]``.
At 1 rank the rank and its py-spy each have a core of a 2-core machine: the profiler's own cost.
Beyond the cores, the ranks and their py-spys share them, and the ratio measures that sharing too.
Each rank runs a fixed CPU loop and a gloo all_reduce, 10 steps. Measured per N, in the same
World: the loop's time (the slowest rank's) without and with ``--profile`` at 100 Hz (median of
``--repeat``) and their ratio (goal: at most 1.03); the profiled cell's time beyond its loop (the
samplers' start and stop, the report); the report's delay, from the cell's summary to the report
in the notebook (goal: at most 1 s at 64 ranks); py-spy's largest memory at the cell's end. Then, at the
smallest N, one long profile of ``--long-seconds``: py-spy's memory at its start and end, and the
growth a minute (goal: at most 20 MB per rank for 10 minutes). Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import threading
import time
from datetime import datetime

import psutil

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SET_UP = ("import time, torch, torch.distributed as dist\ndist.init_process_group('gloo')\n"
          "x = torch.ones(1024)")
LOOP = """def work():
    total = 0
    for i in range({iterations}):
        total += i * i
    return total
began = time.perf_counter()
for step in range({steps}):
    work()
    dist.all_reduce(x)
print(f"loop {{time.perf_counter() - began:.4f}}")
"""


def _stamp(message: dict) -> float:
    date = message["header"]["date"]
    return (date if isinstance(date, datetime) else datetime.fromisoformat(str(date))).timestamp()


def timed_cell(kernel, magic: str, code: str) -> tuple:
    """(wall seconds, the report's delay after the cell's summary or None, the slowest rank's loop
    seconds or None)."""
    began = time.monotonic()
    run = kernel.run_cell(f"{magic}\n{code}", echo=False)
    took = time.monotonic() - began
    assert run.status == "ok", run.shown[-2000:]
    shown = [m for m in run.messages if m["msg_type"] in ("display_data", "update_display_data")]
    summary = [m for m in shown if " ranks | " in m["content"]["data"].get("text/plain", "")]
    report = [m for m in shown if "profile of ranks" in m["content"]["data"].get("text/plain", "")]
    delay = _stamp(report[-1]) - _stamp(summary[-1]) if report and summary else None
    loops = [float(seconds) for seconds in re.findall(r"loop (\d+\.\d+)", run.shown)]
    return took, delay, max(loops) if loops else None


def pyspy_rss_mb() -> list:
    """Every py-spy process's resident memory now, in MB."""
    found = []
    for process in psutil.process_iter(["name", "memory_info"]):
        if process.info["name"] == "py-spy" and process.info["memory_info"]:
            found.append(process.info["memory_info"].rss / 2 ** 20)
    return found


class RssWatch:
    """py-spy's memory, read every second while a cell runs: its largest per process."""

    def __init__(self):
        self.samples: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(1.0):
            self.samples.append((time.monotonic(), pyspy_rss_mb()))

    def stop(self) -> list:
        self._stop.set()
        self._thread.join()
        return [(t, max(values)) for t, values in self.samples if values]


def at_size(kernel, n: int, repeat: int, rate: int) -> dict:
    kernel.quietly(f"%%mpirun -np {n}\n{SET_UP}", timeout=600)
    code = LOOP.format(iterations=max(400_000 * 4 // n, 50_000), steps=20)   # about 3 s a loop
    plain, profiled, delays, cells = [], [], [], []
    for _ in range(repeat):
        plain.append(timed_cell(kernel, "%%mpirun --no-fold", code)[2])
        watch = RssWatch()
        chosen = f" --rate {rate}" if rate else ""   # 0: the default rate (lowered where ranks share cores)
        took, delay, loop = timed_cell(kernel, f"%%mpirun --no-fold --profile{chosen}", code)
        rss = watch.stop()
        profiled.append(loop)
        delays.append(delay)
        cells.append(took - loop)
    ratio = statistics.median(profiled) / statistics.median(plain)
    return {"loop_s": round(statistics.median(plain), 3),
            "profiled_loop_s": round(statistics.median(profiled), 3),
            "ratio": round(ratio, 3), "report_delay_s": round(statistics.median(d for d in delays if d), 3),
            "cell_beyond_loop_s": round(statistics.median(cells), 2),
            "pyspy_rss_mb": round(max((mb for _, mb in rss), default=0.0), 1)}


def long_profile(kernel, seconds: float) -> dict:
    # every rank stops at the same step: the ranks agree on the time being up (all_reduce, MAX)
    code = (f"began, up = time.monotonic(), torch.zeros(1)\nwhile not up.item():\n"
            f"    sum(i * i for i in range(20000))\n    dist.all_reduce(x)\n"
            f"    up[0] = float(time.monotonic() - began >= {seconds})\n"
            f"    dist.all_reduce(up, op=dist.ReduceOp.MAX)\n")
    watch = RssWatch()
    timed_cell(kernel, "%%mpirun --profile --rate 100", code)
    rss = watch.stop()
    (t0, first), (t1, last) = rss[0], rss[-1]
    per_minute = (last - first) / max(t1 - t0, 1.0) * 60
    return {"seconds": seconds, "rss_start_mb": round(first, 1), "rss_end_mb": round(last, 1),
            "growth_mb_per_min": round(per_minute, 2), "at_10_min_mb": round(first + 10 * per_minute, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="1,4,16,64")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--long-seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=100, help="samples a second; 0: the default rate")
    args = parser.parse_args()
    import tests.conftest  # noqa: F401 - a private mlp_magic home for this run
    from tests.kernel import Kernel

    sizes = [int(n) for n in args.ranks.split(",")]
    figures = {"benchmark": "profile", "rate_hz": args.rate}
    kernel = Kernel(echo=False)
    try:
        for n in sizes:
            figures[str(n)] = at_size(kernel, n, args.repeat, args.rate)
            print(f"{n} ranks: {figures[str(n)]}", flush=True)
            if n == sizes[0] and args.long_seconds > 0:
                figures["long"] = long_profile(kernel, args.long_seconds)
                print(f"long profile at {n} ranks: {figures['long']}", flush=True)
    finally:
        kernel.run_cell("%mpirun --stop", echo=False)
        kernel.shutdown()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
