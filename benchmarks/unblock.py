"""Getting out of a hung torch.distributed collective, against what people do today, in one run.

One command: ``python benchmarks/unblock.py [--ranks 4,16,64]``.

For each size: a World whose ranks hold a gloo default group and some state; rank N-1 skips an
``all_reduce`` the others enter, and the cell times out (``--timeout``), as users meet a hang.
Ours: ``%mpirun --unblock``: the time until every stuck rank is free (as it reports it), and the
command's whole time (the default group made again on every rank); then one ``all_reduce``
checks that collectives work and the state is still there. The peer, what users do today:
``%mpirun --restart`` and the set-up cell again (import torch, ``init_process_group``, the state),
until a collective works again; the state itself is lost there (a few numbers here; on a real
job, a model loaded on every node). Goal: every rank free within 2 s at 4, 16 and 64 ranks.
The ranks' CPU time during the command is given per rank: on this 2-core machine the ranks
share the cores (each rank's way out of the failed collective, its traceback and reply, runs in
turn), where a real job has a core per rank.

Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

SETUP = ("%%mpirun -np {np} --oversubscribe\nimport torch, torch.distributed as dist\n"
         "dist.init_process_group('gloo')\nstate = torch.arange(3) * rank\n")
HANG = ("%%mpirun --timeout {seconds}\nt = torch.ones(2)\nif rank != world_size - 1:\n"
        "    dist.all_reduce(t)\n")
CHECK = ("%%mpirun -o checked\nt = torch.ones(1)\ndist.all_reduce(t)\n"
         "assert int(t.item()) == world_size and state.tolist() == [0, rank, 2 * rank]\n")
PEER_CHECK = "%%mpirun\nt = torch.ones(1)\ndist.all_reduce(t)\nassert int(t.item()) == world_size\n"


def run(shell, cell: str) -> tuple:
    """(seconds, printed text, error or None) of one cell, its output kept from the screen."""
    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out):
        result = shell.run_cell(cell)
    return time.perf_counter() - started, out.getvalue(), result.error_in_exec


def rank_processes(shell) -> list:
    import psutil

    from mlp_magic.world.owner import owner_of

    world = owner_of(shell).world
    return [psutil.Process(world.identities[rank]["pid"]) for rank in range(world.np)]


def cpu_seconds(process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def measure(shell, np: int) -> dict:
    run(shell, "%mpirun --stop")
    _, said, error = run(shell, SETUP.format(np=np))
    assert error is None, said
    _, said, error = run(shell, HANG.format(seconds=max(3, np // 8)))
    assert f"timeout on ranks 0-{np - 2}" in str(error), (error, said)
    ranks = rank_processes(shell)
    cpu_before = sum(cpu_seconds(process) for process in ranks)
    took, said, error = run(shell, "%mpirun --unblock")
    cpu = sum(cpu_seconds(process) for process in ranks) - cpu_before
    freed = re.search(r"came free in ([0-9.]+) s", said)
    assert error is None and freed and f"made again (gloo, {np} ranks)" in said, said
    _, said, error = run(shell, CHECK)
    assert error is None, said
    run(shell, HANG.format(seconds=max(3, np // 8)))
    peer_restart, said, error = run(shell, f"%mpirun --restart -np {np} --oversubscribe")
    assert error is None, said
    peer_setup, said, error = run(shell, SETUP.format(np=np) + "\n" + PEER_CHECK.split("\n", 1)[1])
    assert error is None, said
    peer = peer_restart + peer_setup
    run(shell, "%mpirun --stop")
    return {"ranks": np, "free_s": float(freed.group(1)), "unblock_s": round(took, 3),
            "rank_cpu_s_per_rank": round(cpu / np, 3), "cores": os.cpu_count(),
            "peer_restart_and_setup_s": round(peer, 3), "ratio_vs_peer": round(took / peer, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", default="4,16,64")
    sizes = [int(n) for n in parser.parse_args().ranks.split(",")]
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    rows = []
    for np in sizes:
        row = measure(shell, np)
        rows.append(row)
        print(f"{np:4d} ranks: every rank free in {row['free_s']:.2f} s, --unblock {row['unblock_s']:.2f} s "
              f"({row['rank_cpu_s_per_rank']:.3f} s of CPU a rank, {row['cores']} cores); "
              f"peer (--restart + set-up again) {row['peer_restart_and_setup_s']:.2f} s: "
              f"ratio {row['ratio_vs_peer']:.3f}", flush=True)
    print(json.dumps({"benchmark": "unblock", "rows": rows}))


if __name__ == "__main__":
    main()
