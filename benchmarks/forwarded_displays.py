"""The ranks' rich displays forwarded into the notebook while a cell runs, at N ranks, against the
peer (ipyparallel's ``%%px``, which shows them when the cell ends), in one real kernel.

One command: ``python benchmarks/forwarded_displays.py [--ranks 4,16,64,128] [--seconds 3]``.
Each rank makes one HTML display and updates it 10 times a second for ``--seconds`` (as the Hugging
Face Trainer updates its table), every rank's shown (``--all-outputs``; ``%%px`` shows every
engine's). Measured per N, each in the same World: the kernel's CPU seconds for the cell (it reads
every rank's messages and forwards the changes), the display messages the notebook got, and the
cell's wall time; the ratio of our kernel CPU to the peer's. Goal: the notebook gets at most a few
updates a second per display, whatever the ranks' rate, and the kernel's CPU grows linearly with
the ranks. Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import psutil

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

UPDATES = """import time
from IPython.display import HTML, display
table = display(HTML(f"<b>step 0 of rank {{rank}}</b>"), display_id=True)
for step in range({updates}):
    time.sleep(0.1)
    table.update(HTML(f"<b>step {{step + 1}} of rank {{rank}}</b>"))
"""
# %%px on the World's engines: its client's view, activated in the kernel (as progress_overhead)
ACTIVATE = ("from mlp_magic.world.owner import owner_of\n"
            "_view = owner_of(get_ipython()).world.client[:]\n_view.activate()\n")


def timed(kernel, cpu: psutil.Process, magic: str, code: str) -> dict:
    before, began = cpu.cpu_times(), time.monotonic()
    run = kernel.run_cell(f"{magic}\n{code}", echo=False)
    after, took = cpu.cpu_times(), time.monotonic() - began
    assert run.status == "ok", run.shown[-2000:]
    displays = [m for m in run.messages if m["msg_type"] in ("display_data", "update_display_data")]
    return {"kernel_cpu_s": round(after.user + after.system - before.user - before.system, 3),
            "display_messages": len(displays), "wall_s": round(took, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="4,16,64,128")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    import tests.conftest  # noqa: F401 - a private mlp_magic home for this run
    from tests.kernel import Kernel

    code = UPDATES.format(updates=int(args.seconds * 10))
    figures = {"benchmark": "forwarded_displays", "updates_per_s_per_rank": 10, "seconds": args.seconds}
    kernel = Kernel(echo=False)
    cpu = psutil.Process(kernel.pid)
    try:
        for n in [int(n) for n in args.ranks.split(",")]:
            kernel.quietly(f"%%mpirun -np {n}\npass", timeout=600)
            kernel.quietly(ACTIVATE)
            ours = timed(kernel, cpu, "%%mpirun --all-outputs", code)
            peer = timed(kernel, cpu, "%%px --block", code)
            ratio = round(ours["kernel_cpu_s"] / max(peer["kernel_cpu_s"], 0.001), 2)
            figures[str(n)] = {"mpirun": ours, "px": peer, "kernel_cpu_ratio": ratio}
            print(f"{n} ranks: %%mpirun {ours}, %%px {peer}, kernel CPU ratio {ratio}", flush=True)
    finally:
        kernel.run_cell("%mpirun --stop", echo=False)
        kernel.shutdown()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
