"""Engine weight: modules, memory and start of each rank of a World, against the floor, same run.

One command: ``python benchmarks/engine_weight.py [--ranks 4,64,128]``. All ranks local
(oversubscribed; OpenMPI btl self,sm,tcp, pml ob1).
- The floor: a bare Python importing ipykernel's kernel, ipyparallel and mpi4py's MPI (what an
  engine cannot do without; issue 26 counted 497 modules), and the engine floor: ipyparallel's
  engine application with mpi4py's MPI. Each measured three times in this run (memory: median).
- Per N, a World started as ``%%mpirun`` starts it; then, before any cell, per engine: the modules
  it holds (``len(sys.modules)``, asked on the engine), its RSS (psutil, from outside), the CPU it
  used to start (psutil: user + system, until the World was ready) and, where the engine reports
  it (``engine/identity.STARTED``), the wall time from its process's birth to its registration.
- The peer for the start's CPU, per N in the same run: ``mpiexec -n N`` bare ranks doing the
  floor's imports (MPI_Init included); the ratio is the engines' median over theirs.
- The heavy modules still loaded (``HEAVY``), and what the fattest engine holds beyond the floor.
- Then, per engine, the modules it holds as a script's first line runs (``%mpirun script.py``'s
  cell, after the World's first: tests/integration/test_engine_weight.py checks the same).
Goals are printed, not asserted: modules <= 1.10 x floor after the start (issue 26), <= 1.12 x
at a script's start (issue 43), RSS <= 60 MB (issue 26's 76-79 MB were MiB, as here; the JSON
has both).
Last line: one JSON object. ``PYTHONPATH=<old checkout>`` measures another version of mlp_magic.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import psutil

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
os.environ.update(OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl="self,sm,tcp", OMPI_MCA_pml="ob1")

FLOORS = {"floor": "import ipykernel.ipkernel, ipyparallel; from mpi4py import MPI",
          "engine_floor": "from ipyparallel.engine.app import IPEngine; from mpi4py import MPI"}
HEAVY = ("debugpy", "pydevd", "_pydevd_bundle", "numpy", "pynvml", "sqlite3")
GOALS = {"modules_ratio": 1.10, "script_modules_ratio": 1.12, "rss_mib": 60.0}
REPORT = ("import sys\n_names = sorted(sys.modules)\nimport json, psutil\n"
          "print(json.dumps([_names, psutil.Process().memory_info().rss]))")


def floor(code: str, runs: int = 3) -> dict:
    """A bare Python running ``code``: its modules (and their names), its RSS (median of runs)."""
    found = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", f"{code}\n{REPORT}"], capture_output=True, text=True,
                             check=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        found.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"modules": len(found[0][0]), "names": found[0][0],
            "rss_mib": round(statistics.median(rss for _, rss in found) / 2 ** 20, 1)}


def bare_ranks_cpu(n: int) -> dict:
    """The peer: ``mpiexec -n N`` bare ranks doing the floor's imports (MPI_Init included), each
    one's CPU seconds when done (user + system): what a rank costs to start without an engine."""
    code = f"{FLOORS['floor']}\nimport json, os\nprint(json.dumps(sum(os.times()[:2])))"
    from mlp_magic.world.start.mpi import find_mpiexec

    # the World's mpiexec (Open MPI: this benchmark sets its variables), placed as a World's ranks are
    argv = [find_mpiexec() or "mpiexec", "-n", str(n), "--oversubscribe", "--map-by", "slot",
            sys.executable, "-c", code]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600, env=env)
    return spread([float(line) for line in done.stdout.split()])


def on_engine(heavy: tuple) -> dict:
    """Runs on each engine (sent by value): what it holds now."""
    import sys

    tops = {name.partition(".")[0] for name in sys.modules}
    return {"modules": len(sys.modules), "heavy": sorted(tops & set(heavy))}


def names_on_engine() -> list:
    import sys

    return sorted(sys.modules)


# ipyparallel sends a function by value only when its module's name starts with "__" (else the
# engine imports the module, and no engine can import this script when scale.py imports it).
on_engine.__module__ = names_on_engine.__module__ = "__main__"


def rank_processes(world) -> dict:
    """rank -> psutil.Process of each rank (the pids the engines reported)."""
    return {rank: psutil.Process(identity["pid"]) for rank, identity in world.identities.items()}


def spread(values: list, scale: float = 1.0, digits: int = 3) -> dict:
    values = [v * scale for v in values if v is not None]
    if not values:
        return {}
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits)}


def per_engine(world, floor_names: list) -> dict:
    processes = rank_processes(world)
    cpu = {r: sum(p.cpu_times()[:2]) for r, p in processes.items()}   # before our probes run
    rss = {r: p.memory_info().rss for r, p in processes.items()}
    asked = {r: world.client[world.rank_to_engine[r]].apply_async(on_engine, HEAVY) for r in processes}
    found = {r: result.get(timeout=120) for r, result in asked.items()}
    fattest = max(found, key=lambda r: found[r]["modules"])
    typical = sorted(found, key=lambda r: found[r]["modules"])[len(found) // 2]
    names, typical_names = (world.client[world.rank_to_engine[r]].apply_sync(names_on_engine)
                            for r in (fattest, typical))
    started = {r: i.get("started", {}) for r, i in world.identities.items()}
    registered = [s["registered_at"] - world.identities[r]["create_time"] for r, s in started.items()
                  if s.get("registered_at") and world.identities[r].get("create_time")]
    return {"modules": spread([f["modules"] for f in found.values()], digits=1),
            "rss_mib": spread(list(rss.values()), 2 ** -20, 1), "rss_mb": spread(list(rss.values()), 1e-6, 1),
            "start_cpu_s": spread(list(cpu.values())),
            "start_to_registered_s": spread(registered),
            "registered_cpu_s": spread([s.get("cpu_s") for s in started.values()]),
            "heavy_loaded": sorted({name for f in found.values() for name in f["heavy"]}),
            "fattest_rank": fattest, "fattest_beyond_floor": sorted(set(names) - set(floor_names)),
            "typical_rank": typical, "typical_beyond_floor": sorted(set(typical_names) - set(floor_names))}


# A script that keeps what its rank held at its first line in the rank's namespace (a script runs
# there, as `%run -i` does), and the cell `%mpirun PATH` sends (debugging/prepare.script_cell).
SCRIPT = "import sys\n_mlp_weight_held = sorted(sys.modules)\n"
SCRIPT_CELL = ("# mlp_magic generated: script\n__import__('mlp_magic.debugging.rank.script', "
               "fromlist=['run_script']).run_script({path!r}, [{path!r}])\n")


def at_script_start(world, floor_names: list) -> dict:
    """Each engine's modules as a script's first line runs, after a first cell (``pass``)."""
    folder = tempfile.mkdtemp(prefix="mlp-weight-script-")
    path = os.path.join(folder, "weight_script.py")
    with open(path, "w") as file:
        file.write(SCRIPT)
    view = world.client[sorted(world.rank_to_engine.values())]
    for code in ("pass", SCRIPT_CELL.format(path=path)):
        view.execute(code, silent=False, block=True)
    held = {r: world.client[e].pull("_mlp_weight_held", block=True) for r, e in world.rank_to_engine.items()}
    fattest = max(held, key=lambda r: len(held[r]))
    return {"script_modules": spread([len(names) for names in held.values()], digits=1),
            "script_fattest_rank": fattest,
            "script_beyond_floor": sorted(set(held[fattest]) - set(floor_names))}


def run_one(n: int, floor_names: list) -> dict:
    from mlp_magic.machine.topology import topology_from_environment
    from mlp_magic.world.world import World, WorldSpec

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLP_MPI_", "MLP_WORKER_", "SLURM_"))}
    world = World(WorldSpec(topology_from_environment(env), n, oversubscribe=True), notice=lambda *a: None)
    began = time.perf_counter()
    try:
        world.start()
        figures = {"ranks": n, "world_start_s": round(time.perf_counter() - began, 2)}
        figures.update(per_engine(world, floor_names))
        figures.update(at_script_start(world, floor_names))
    finally:
        world.stop()
    try:
        figures["bare_rank_cpu_s"] = bare = bare_ranks_cpu(n)
        figures["start_cpu_ratio"] = round(figures["start_cpu_s"]["median"] / bare["median"], 2)
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as err:   # the World's figures stand
        figures["bare_rank_cpu_s"], figures["start_cpu_ratio"] = {"median": "-"}, "-"
        figures["bare_error"] = f"{type(err).__name__}: {err}"[:400]
    return figures


def judge(figures: dict, floors: dict) -> None:
    modules = figures.get("modules", {})
    if modules:
        figures["modules_ratio"] = round(modules["max"] / floors["floor"]["modules"], 3)   # every engine
        figures["modules_ratio_median"] = round(modules["median"] / floors["floor"]["modules"], 3)
        figures["modules_ratio_engine_floor"] = round(modules["max"] / floors["engine_floor"]["modules"], 3)
    script = figures.get("script_modules", {})
    if script:
        figures["script_modules_ratio"] = round(script["max"] / floors["floor"]["modules"], 3)
    rss = figures.get("rss_mib", {})
    figures["meets"] = {name: figures.get(name, 99) <= GOALS[name]
                        for name in ("modules_ratio", "script_modules_ratio")}
    figures["meets"]["rss_mib"] = rss.get("max", 1e9) <= GOALS["rss_mib"]


def print_table(floors: dict, results: list) -> None:
    for name, found in floors.items():
        print(f"{name}: {found['modules']} modules, RSS {found['rss_mib']} MiB   ({FLOORS[name]})")
    print("N | world start s | modules med/max | /floor med/max | RSS MiB med/max | start CPU s med/max | "
          "bare rank CPU s med (ratio) | birth->registered s med/max | heavy loaded")
    for r in results:
        if "error" in r:
            print(f"{r['ranks']} | error: {r['error']}")
            continue
        m, rss, cpu, reg = r["modules"], r["rss_mib"], r["start_cpu_s"], r["start_to_registered_s"]
        print(f"{r['ranks']} | {r['world_start_s']} | {m['median']:.0f}/{m['max']:.0f} | "
              f"{r['modules_ratio_median']}/{r['modules_ratio']} | {rss['median']}/{rss['max']} | "
              f"{cpu['median']}/{cpu['max']} | "
              f"{r['bare_rank_cpu_s']['median']} ({r['start_cpu_ratio']}x) | "
              f"{reg.get('median', '-')}/{reg.get('max', '-')} | {','.join(r['heavy_loaded']) or '-'}")
        for which in ("typical", "fattest"):
            beyond = r[f"{which}_beyond_floor"]
            print(f"   {which}: rank {r[f'{which}_rank']} beyond the floor ({len(beyond)}): "
                  f"{' '.join(beyond)}")
        script, beyond = r["script_modules"], r["script_beyond_floor"]
        print(f"   at a script's start: modules {script['median']:.0f}/{script['max']:.0f} "
              f"({r['script_modules_ratio']}x the floor); rank {r['script_fattest_rank']} beyond it "
              f"({len(beyond)}): {' '.join(beyond)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default=[4, 64, 128], help="comma-separated rank counts",
                        type=lambda text: [int(part) for part in text.split(",") if part.strip()])
    options = parser.parse_args()
    home = None if "MLP_MAGIC_HOME" in os.environ else tempfile.mkdtemp(prefix="mlp-weight-")
    os.environ.setdefault("MLP_MAGIC_HOME", home)
    floors = {name: floor(code) for name, code in FLOORS.items()}
    results = []
    for n in options.ranks:
        print(f"N={n} ...", flush=True)
        try:
            figures = run_one(n, floors["floor"]["names"])
        except Exception as err:   # one N failing is its result; the next still runs
            figures = {"ranks": n, "error": f"{type(err).__name__}: {err}"[:400]}
        judge(figures, floors)
        results.append(figures)
    print_table(floors, results)
    import mlp_magic

    shown = {k: {"modules": v["modules"], "rss_mib": v["rss_mib"], "code": FLOORS[k]}
             for k, v in floors.items()}
    print(json.dumps({"benchmark": "engine_weight", "mlp_magic": os.path.dirname(mlp_magic.__file__),
                      "floors": shown, "goals": GOALS, "results": results}))


if __name__ == "__main__":
    main()
