"""Does an open panel slow the cells? One command: ``python benchmarks/panel_cell_overhead.py``.

A real World of ``--np`` local ranks in this process, and a jupyter_server with mlp_magic's
extension serving its live record. The same cells run with the panel closed (no websocket) and
open (a websocket on ``mlp-magic/live`` receiving every patch, in a process of its own as a
browser tab is), in
alternating blocks so both see the same machine:
1. a warm ``pass`` cell, ``--pass-rounds`` times each way: median round trip;
2. a training-like cell of fixed work: every rank runs the same number of steps of a 256x256
   matmul chain (calibrated to about ``--train-seconds``), printing a loss line every ~0.5 s,
   ``--train-rounds`` times each way: its wall time.
Goal (issue 23): open/closed ratio within noise (the spread of closed against closed is printed
for scale). Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from panel_load import free_loopback_port, start_server  # noqa: E402

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

TRAIN_CELL = """%%mpirun
import time, numpy as np
w = np.random.default_rng(rank).standard_normal((256, 256)) / 16
x = np.ones((256, 256))
last = time.monotonic()
for step in range({steps}):
    x = np.tanh(x @ w)
    if time.monotonic() - last > 0.5:
        print(f"step {{step}} loss {{float(x.mean()):.4f}}")
        last = time.monotonic()
"""


def timed_cell(shell, cell: str) -> float:
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        result = shell.run_cell(cell)
    if not result.success:
        raise SystemExit(f"cell failed: {cell[:80]!r}")
    return time.perf_counter() - started


def calibrate_steps(shell, seconds: float) -> int:
    """Steps that take about ``seconds`` on these ranks (from a 200-step probe)."""
    probe = 200
    elapsed = timed_cell(shell, TRAIN_CELL.format(steps=probe))
    return max(probe, int(probe * seconds / elapsed))


class Panel:
    """The panel's websocket, opened and closed between blocks, in a process of its own (a browser
    tab is not in the kernel's process: a watcher thread here would take the kernel's GIL)."""

    def __init__(self, base: str, token: str):
        self.base, self.token = base, token
        self.process = None
        self.patches = 0

    def open(self) -> None:
        watcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "live_watch.py")
        self.process = subprocess.Popen([sys.executable, watcher, self.base, self.token],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != "connected":
            raise SystemExit("the panel's websocket did not connect")
        time.sleep(0.5)   # its snapshot is in

    def close(self) -> None:
        if self.process is not None:
            said, _ = self.process.communicate("", timeout=30)
            self.patches += json.loads(said.splitlines()[-1])["messages"].get("patch", 0)
            self.process = None


def alternate(panel: Panel, rounds: int, block: int, measure) -> dict:
    """``rounds`` measurements each way, in blocks of ``block``, closed first then open."""
    times = {"closed": [], "open": []}
    while len(times["open"]) < rounds:
        for way in ("closed", "open"):
            if way == "open":
                panel.open()
            try:
                times[way] += [measure() for _ in range(min(block, rounds - len(times[way])))]
            finally:
                panel.close()
    return times


def spread(values: list) -> float:
    """Half the closed runs against the other half: the noise a ratio must be read against."""
    first, second = values[0::2], values[1::2]
    return round(statistics.median(second) / statistics.median(first), 3) if first and second else None


def run(args) -> dict:
    from IPython.testing.globalipapp import start_ipython

    with tempfile.TemporaryDirectory(prefix="mlp-panel-cells-") as tmp:
        home = Path(tmp)
        (home / "worlds").mkdir()
        os.environ["MLP_MAGIC_STATE_DIR"] = str(home / "worlds")
        (home / "hostfile").write_text(f"localhost slots={args.np}\n")
        port, token = free_loopback_port(), secrets.token_hex(16)
        server = start_server(home, home / "hostfile", port, token, cache_seconds=4.0)
        shell = start_ipython()
        shell.run_line_magic("load_ext", "mlp_magic")
        panel = Panel(f"http://127.0.0.1:{port}/", token)
        try:
            timed_cell(shell, f"%%mpirun -np {args.np}\npass")
            for _ in range(5):
                timed_cell(shell, "%%mpirun\npass")
            passes = alternate(panel, args.pass_rounds, 10, lambda: timed_cell(shell, "%%mpirun\npass"))
            print(f"pass cells: {summary(passes)}", flush=True)
            steps = calibrate_steps(shell, args.train_seconds)
            train = alternate(panel, args.train_rounds, 1,
                              lambda: timed_cell(shell, TRAIN_CELL.format(steps=steps)))
            print(f"training-like cells ({steps} steps): {summary(train)}", flush=True)
        finally:
            panel.close()
            with contextlib.redirect_stdout(io.StringIO()):
                shell.run_line_magic("mpirun", "--stop")
            server.terminate()
            server.wait(15)
    return {"pass_cell": summary(passes), "training_cell": summary(train), "train_steps": steps,
            "ranks": args.np, "patches_received": panel.patches,
            "peer": "the same cells with the panel closed"}


def summary(times: dict) -> dict:
    closed, opened = statistics.median(times["closed"]), statistics.median(times["open"])
    return {"closed_s": round(closed, 4), "open_s": round(opened, 4), "ratio": round(opened / closed, 3),
            "closed_vs_closed": spread(times["closed"]), "rounds": len(times["open"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=4)
    parser.add_argument("--pass-rounds", type=int, default=60)
    parser.add_argument("--train-seconds", type=float, default=60.0)
    parser.add_argument("--train-rounds", type=int, default=2)
    args = parser.parse_args()
    if args.np < 1 or args.pass_rounds < 2 or args.train_rounds < 1 or args.train_seconds <= 0:
        parser.error("--np >= 1, --pass-rounds >= 2, --train-rounds >= 1, --train-seconds > 0")
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
