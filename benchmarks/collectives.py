"""What the hang report's collectives cost, measured in one run against running without them.

One command: ``python benchmarks/collectives.py [--ranks 4,16,64] [--parts recorder,section]``.

recorder: PyTorch's flight recorder, which a World turns on (TORCH_FR_BUFFER_SIZE=2000), on a
loop of small gloo all_reduces (4 floats: the case where a per-collective cost shows most),
against the same loop with the recorder off, in separate process groups of 2 ranks (the cores
of this machine), alternating off and on for several rounds; the median of each, and the ratio.
Also: a rank's resident memory after the loop, and one dump of a full buffer (what a hang report
asks of each rank: ``_dump_fr_trace_json`` and ``slim``). Goal: <= 3 % slower.

section: for each size, a World whose ranks hold a gloo group; rank N-1 skips an all_reduce
the others enter, the cell times out. Then, on the hung ranks, the stack report without the
collectives (the peer: the report as it was) and the added part: asking every rank and
rendering the section: the report's collection with and without them, each timed over several
rounds (median), the difference and its ratio to the stacks alone.

Last line: one JSON object.
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

OPS, WARMUP, ROUNDS = 4000, 300, 5
LOOP = """
import json, os, resource, sys, time
import torch, torch.distributed as dist
rank, size, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{{port}}", rank=rank, world_size=size)
t = torch.ones(4)
for _ in range({warmup}):
    dist.all_reduce(t)
dist.barrier()
started = time.perf_counter()
for _ in range({ops}):
    dist.all_reduce(t)
took = time.perf_counter() - started
dump_s = None
if os.environ.get("TORCH_FR_BUFFER_SIZE"):
    from mlp_magic.stacks.rank.recorder import recorded
    began = time.perf_counter()
    groups = recorded()["groups"]
    dump_s = time.perf_counter() - began
    assert groups and groups[0]["enqueued"] >= {ops}, groups
rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if rank == 0:
    print(json.dumps({{"per_op_us": took / {ops} * 1e6, "dump_s": dump_s, "rss_mib": rss_mib}}))
dist.destroy_process_group()
"""


def loop_once(recorder_on: bool, ranks: int = 2, port: int = 29611) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")}
    if recorder_on:
        from mlp_magic.stacks.rank.recorder import DEFAULT_ENTRIES

        env["TORCH_FR_BUFFER_SIZE"] = str(DEFAULT_ENTRIES)
    env["PYTHONPATH"] = os.path.join(HERE, "..")
    code = LOOP.format(ops=OPS, warmup=WARMUP)
    children = [subprocess.Popen([sys.executable, "-c", code, str(r), str(ranks), str(port)], env=env,
                                 stdout=subprocess.PIPE, text=True) for r in range(ranks)]
    outs = [child.communicate(timeout=300)[0] for child in children]
    assert all(child.returncode == 0 for child in children), outs
    return json.loads(outs[0].strip().splitlines()[-1])


def recorder_part() -> dict:
    off, on = [], []
    for index in range(ROUNDS):
        order = (False, True) if index % 2 == 0 else (True, False)
        for recorder_on in order:
            (on if recorder_on else off).append(loop_once(recorder_on, port=29611 + index * 2 + recorder_on))
    row = {"ops": OPS, "rounds": ROUNDS,
           "off_us_per_op": round(statistics.median(r["per_op_us"] for r in off), 2),
           "on_us_per_op": round(statistics.median(r["per_op_us"] for r in on), 2),
           "off_rss_mib": round(statistics.median(r["rss_mib"] for r in off), 1),
           "on_rss_mib": round(statistics.median(r["rss_mib"] for r in on), 1),
           "dump_s": round(statistics.median(r["dump_s"] for r in on), 4)}
    row["ratio_on_vs_off"] = round(row["on_us_per_op"] / row["off_us_per_op"], 3)
    print(f"recorder: {OPS} all_reduces of 4 floats, 2 ranks: {row['on_us_per_op']:.1f} us each on, "
          f"{row['off_us_per_op']:.1f} us off: ratio {row['ratio_on_vs_off']:.3f}; memory "
          f"{row['on_rss_mib']:.0f} vs {row['off_rss_mib']:.0f} MiB; one full dump and slim "
          f"{row['dump_s'] * 1000:.1f} ms", flush=True)
    return row


SETUP = ("%%mpirun -np {np} --oversubscribe\nimport torch, torch.distributed as dist\n"
         "dist.init_process_group('gloo')\nfor _ in range(3):\n    dist.all_reduce(torch.ones(2))\n")
HANG = "%%mpirun --timeout {seconds}\nt = torch.ones(2)\nif rank != world_size - 1:\n    dist.all_reduce(t)\n"


def quiet(shell, cell: str):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        result = shell.run_cell(cell)
    return result.error_in_exec, out.getvalue()


def section_row(shell, np: int) -> dict:
    from mlp_magic.stacks import snapshot
    from mlp_magic.stacks.pure.collectives import section
    from mlp_magic.world.owner import owner_of

    quiet(shell, "%mpirun --stop")
    error, said = quiet(shell, SETUP.format(np=np))
    assert error is None, said
    error, said = quiet(shell, HANG.format(seconds=max(3, np // 8)))
    assert "in all_reduce #4" in said, said
    world = owner_of(shell).world
    ranks = list(range(np))
    stacks, whole = [], []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        dumps, _ = snapshot.collect(world, ranks, with_collectives=False)
        stacks.append(time.perf_counter() - began)
        began = time.perf_counter()
        dumps, answers = snapshot.collect(world, ranks)
        lines = section(answers, {})
        whole.append(time.perf_counter() - began)
        assert len(dumps) == np and any("behind by 1" in line for line in lines), lines
    quiet(shell, "%mpirun --stop")
    row = {"ranks": np, "stacks_s": round(statistics.median(stacks), 3),
           "with_collectives_s": round(statistics.median(whole), 3)}
    row["collectives_s"] = round(row["with_collectives_s"] - row["stacks_s"], 3)
    row["ratio_added_vs_stacks"] = round(row["collectives_s"] / row["stacks_s"], 3)
    print(f"{np:4d} ranks: stack report {row['stacks_s']:.2f} s; the collectives section adds "
          f"{row['collectives_s']:.2f} s (ratio {row['ratio_added_vs_stacks']:.2f})", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", default="4,16,64")
    parser.add_argument("--parts", default="recorder,section")
    options = parser.parse_args()
    parts = options.parts.split(",")
    figures: dict = {"benchmark": "collectives"}
    if "recorder" in parts:
        figures["recorder"] = recorder_part()
    if "section" in parts:
        from IPython.testing.globalipapp import start_ipython

        shell = start_ipython()
        shell.run_line_magic("load_ext", "mlp_magic")
        figures["section"] = [section_row(shell, int(np)) for np in options.ranks.split(",")]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
