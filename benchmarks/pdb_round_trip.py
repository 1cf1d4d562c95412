"""How long a pdb command on every rank stopped at a breakpoint takes: ``%mpirun --pdb p x``, sent
on each rank's control channel and shown grouped and folded, against the peer's own way to read
one value from every rank of the same World while it is idle (an ipyparallel DirectView's
``apply_sync`` on all engines), measured in the same run.

One command: ``python benchmarks/pdb_round_trip.py [--ranks 4,16,64,128] [--rounds 5]``.

For each size: a World of that many local ranks (oversubscribed), the peer's round trip first
(idle ranks), then a cell stops every rank at ``breakpoint()``; ``--pdb p x`` is timed end to end
(the magic, the requests, pdb on every rank, the grouped display) and so is the bare round trip
(debugging/stopped.ask: the requests and the replies only); medians; then ``--pdb c``.
Ratio: ours (the whole magic) over the peer's. Goal: ``p`` <= 0.5 s at 128 ranks. Last line: JSON.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
for name, value in {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "OMPI_MCA_btl": "self,sm,tcp", "OMPI_MCA_pml": "ob1"}.items():
    os.environ.setdefault(name, value)
GOAL_S, GOAL_RANKS = 0.5, 128


def quietly(shell, text: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        result = shell.run_cell(text)
    if result.error_in_exec is not None:
        raise SystemExit(f"{text!r} failed: {result.error_in_exec}\n{out.getvalue()[-2000:]}")


def timed(action, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def measure(shell, np: int, rounds: int) -> dict:
    from mlp_magic.debugging.stopped import ANSWER_WAIT_S, ask, paused_cell
    from mlp_magic.world.owner import owner_of

    quietly(shell, f"%%mpirun -np {np} --oversubscribe --restart\nx = rank * 0.5")
    world = owner_of(shell).world
    view = world.client[:]
    peer = timed(lambda: view.apply_sync(lambda: 1), rounds)
    quietly(shell, "%%mpirun\nbreakpoint()\npass")
    cell = paused_cell(world)
    assert len(cell.paused_ranks()) == np, cell.paused_ranks()
    ours = timed(lambda: quietly(shell, "%mpirun --pdb p x"), rounds)
    bare = timed(lambda: ask(cell, list(range(np)), {"command": "p x"}, ANSWER_WAIT_S), rounds)
    quietly(shell, "%mpirun --pdb c")
    return {"ranks": np, "p_s": round(ours, 3), "round_trip_s": round(bare, 3),
            "peer_apply_s": round(peer, 3), "ratio": round(ours / peer, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="4,16,64,128")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ["MLP_MAGIC_HOME"] = tempfile.mkdtemp(prefix="mlp-pdb-bench-")
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    try:
        rows = [measure(shell, int(np), args.rounds) for np in args.ranks.split(",")]
    finally:
        quietly(shell, "%mpirun --stop")
    print(f"{'ranks':>6} {'p s':>7} {'trip s':>7} {'peer s':>7} {'ratio':>6}")
    for row in rows:
        print(f"{row['ranks']:>6} {row['p_s']:>7.3f} {row['round_trip_s']:>7.3f} "
              f"{row['peer_apply_s']:>7.3f} {row['ratio']:>6.2f}")
    at_goal = next((row["p_s"] for row in rows if row["ranks"] == GOAL_RANKS), None)
    print(json.dumps({"rows": rows, "goal_p_128_s": GOAL_S,
                      "goal_met": None if at_goal is None else at_goal <= GOAL_S}))


if __name__ == "__main__":
    main()
