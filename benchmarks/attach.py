"""How long ``%mpirun --attach`` takes to take up a kept World whose kernel was SIGKILLed, against
the peer's own way back to a running cluster: an ipyparallel ``Client`` on the same connection
file, waiting until every engine is listed (what ``Cluster.from_file(...).connect_client()``
comes down to), measured in the same run on the same World.

One command: ``python benchmarks/attach.py [--ranks 4,16,64] [--rounds 3]``.

For each size: a kernel of its own starts a kept World of that many local ranks and is killed;
this process attaches (``--rounds`` times: each attach is let go again, as a kernel's exit
would; the first, with this process's first imports, is shown apart), then connects the plain
client as many times; medians. Ratio: ours over the peer's.
Goal: attach <= 2 s at 64 ranks. Last line: one JSON object.
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
for name, value in {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "OMPI_MCA_btl": "self,sm,tcp", "OMPI_MCA_pml": "ob1"}.items():
    os.environ.setdefault(name, value)

KERNEL = """
import sys
from IPython.testing.globalipapp import start_ipython
ip = start_ipython(); ip.run_line_magic("load_ext", "mlp_magic")
ok = ip.run_cell("%%mpirun -np {np} --oversubscribe --keep\\nx = rank").success
print("READY" if ok else "FAILED", flush=True)
sys.stdin.read()
"""


def kept_world(np: int) -> None:
    """A kernel of its own starts a kept World of ``np`` ranks, and is SIGKILLed."""
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL.format(np=np)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    said = ""
    while said not in ("READY", "FAILED"):
        line = kernel.stdout.readline()
        if not line:
            break
        said = line.strip()
    kernel.kill()
    kernel.wait()
    if said != "READY":
        raise SystemExit(f"the kernel could not start a World of {np} ranks ({said or 'no answer'})")


def attach_s(shell, rounds: int) -> float:
    from mlp_magic.world.owner import owner_of

    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()) as out:
            result = shell.run_cell("%mpirun --attach")
        times.append(time.perf_counter() - began)
        assert result.error_in_exec is None, out.getvalue()
        owner_of(shell).leave()   # kept: let go, as a kernel's exit does
    return times[0], statistics.median(times)


def peer_s(client_file: str, np: int, rounds: int) -> float:
    import ipyparallel

    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        client = ipyparallel.Client(client_file)
        while len(client.ids) < np:
            time.sleep(0.001)
        times.append(time.perf_counter() - began)
        client.close(linger=0)
    return statistics.median(times)


def measure(shell, np: int, rounds: int) -> dict:
    from mlp_magic.world import published
    from mlp_magic.world.keep import found
    from mlp_magic.world.facts import read_facts

    kept_world(np)
    [record] = found.worlds()
    try:
        first, ours = attach_s(shell, rounds)
        facts = read_facts(published.private_part(record)["workdir"])
        peer = peer_s(facts["client_file"], np, rounds)
    finally:
        found.stop(found.find(record["id"]))
    return {"ranks": np, "first_attach_s": round(first, 3), "attach_s": round(ours, 3),
            "peer_client_s": round(peer, 3), "ratio": round(ours / peer, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="4,16,64")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["MLP_MAGIC_HOME"] = tempfile.mkdtemp(prefix="mlp-attach-bench-")
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython()
    shell.run_line_magic("load_ext", "mlp_magic")
    rows = [measure(shell, int(np), args.rounds) for np in args.ranks.split(",")]
    print(f"{'ranks':>6} {'first s':>8} {'attach s':>9} {'peer s':>8} {'ratio':>6}")
    for row in rows:
        print(f"{row['ranks']:>6} {row['first_attach_s']:>8.3f} {row['attach_s']:>9.3f} "
              f"{row['peer_client_s']:>8.3f} {row['ratio']:>6.2f}")
    at_64 = next((row["attach_s"] for row in rows if row["ranks"] == 64), None)
    print(json.dumps({"rows": rows, "goal_attach_64_s": 2.0,
                      "goal_met": None if at_64 is None else at_64 <= 2.0}))


if __name__ == "__main__":
    main()
