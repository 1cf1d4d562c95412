"""Scale: a World of N local ranks vs ipyparallel's ``Cluster(engines="mpi", n=N)``, same run.

One command: ``python benchmarks/scale.py [--ranks 4,16,64,128] [--cells N] [--peer-timeout S]``.
Per N (all ranks here, oversubscribed; OpenMPI btl self,sm,tcp, pml ob1 on both sides):
1. start to the first ``pass`` result: the peer first (``start_and_connect_sync()``, engine_timeout
   ``--peer-timeout``, else its defaults, nanny included; a failure is a result), then ours beside
   the idle peer (whose CPU meanwhile is reported): the first ``%%mpirun -np N --oversubscribe``;
2. wall per ``pass`` cell (medians), interleaved: ``%%mpirun``, ``%%px --block``, the peer's
   ``broadcast_view().execute("pass", block=True)``;
3. CPU per cell and rank: the kernel (this process, ``time.process_time``) plus the controller's
   process tree; apart, the launcher with its ranks (and nannies) (psutil, 10 ms ticks: averaged);
4. messages per cell: what the kernel's Client sends and receives (its Session's ``send`` and
   ``deserialize``); the controller relays each to or from the engines, uncounted there;
5. memory per rank: a rank process (the launcher's child) and its descendants (the peer's nanny);
6. our engines' weight (benchmarks/engine_weight.py): modules per engine against the floor (a bare
   Python importing ipykernel, ipyparallel and mpi4py, measured once in this run), RSS, start CPU.
Where the peer does not start (128 ranks here), 2. and 3. run ``%%px`` and a broadcast view on our
own engines instead (``px_on_ours``, ``broadcast_on_ours``): what ipyparallel's client costs on
top of our engines and controller, which shows our magic's own overhead; not the goals' peer.
Both sides stop after each N, and on Ctrl-C; no process of ours may be left (psutil checks).
Goals are printed, not asserted. Last line: one JSON object.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import signal
import statistics
import tempfile
import time

import ipyparallel
import psutil
from engine_weight import FLOORS, floor, per_engine
from scale_processes import descendants, family, memory_per_rank, sweep, tree_cpu

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
os.environ.update(OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl="self,sm,tcp", OMPI_MCA_pml="ob1")

WARM_CELLS = 3
INTERRUPTED = []  # set by Ctrl-C / SIGTERM: a %%mpirun cell turns Ctrl-C into a RankFailure
FLOOR: dict = {}  # ipykernel + ipyparallel + mpi4py in a bare Python: its modules (6. above)
# name: (ratio, the rank counts it is judged at (None: all), at most)
GOALS = {"start_ratio_at_128": ("start_ratio", (128,), 0.8),
         "wall_vs_broadcast_at_64_128": ("wall_ratio_vs_broadcast", (64, 128), 0.9),
         "cpu_per_rank_vs_px": ("cpu_ratio_vs_px", None, 0.5)}


def count_messages(session) -> list:
    """[sent, received] by a Client's Session from now on (point 4 of the module docstring)."""
    counts = [0, 0]

    def counted(method, index: int):
        def wrapper(*args, **kwargs):
            counts[index] += 1
            return method(*args, **kwargs)
        return wrapper

    session.send, session.deserialize = counted(session.send, 0), counted(session.deserialize, 1)
    return counts


def timed_cell(shell, cell: str) -> float:
    sink, started = io.StringIO(), time.perf_counter()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        result = shell.run_cell(cell)
    elapsed = time.perf_counter() - started
    if INTERRUPTED or isinstance(result.error_in_exec, KeyboardInterrupt):
        raise KeyboardInterrupt  # IPython catches Ctrl-C in a cell; the benchmark must stop
    if not result.success:
        raise RuntimeError(f"cell failed: {cell.splitlines()[0]!r}: {sink.getvalue()[-1500:]}")
    return elapsed


class Peer:
    """ipyparallel's own MPI cluster, started as its documentation shows."""

    def __init__(self, n: int, timeout: float):
        self.n, self.client, self.error, self.launcher = n, None, None, None
        self.profile = tempfile.mkdtemp(prefix="mlp-scale-peer-")  # its files, not in ~/.ipython
        self.cluster = ipyparallel.Cluster(engines="mpi", n=n, log_level=40, engine_timeout=int(timeout),
                                           profile_dir=self.profile)
        self.cluster.config.MPILauncher.mpi_args = ["--oversubscribe"]

    def start(self) -> dict:
        started = time.perf_counter()
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # its progress bar
                self.client = self.cluster.start_and_connect_sync()
            connected = time.perf_counter() - started
            if len(self.client.ids) != self.n:
                raise RuntimeError(f"{len(self.client.ids)} of {self.n} engines registered")
            self.client[:].execute("pass", block=True)
            self.launcher = next(iter(self.cluster.engines.values())).pid  # mpiexec, the ranks' parent
        except Exception as err:  # the peer failing is a result, not a crash
            self.error = f"{type(err).__name__}: {err}"[:300]
            return {"error": self.error, "after_s": round(time.perf_counter() - started, 2),
                    "output_tail": self.output_tail()}
        return {"connected_s": round(connected, 3), "first_result_s": round(time.perf_counter() - started, 3)}

    def output_tail(self) -> str:
        with contextlib.suppress(Exception):
            return "\n".join(launcher.get_output()[-600:]
                             for launcher in [self.cluster.controller, *self.cluster.engines.values()])
        return ""

    def controller(self) -> list:
        """The controller the Cluster launched (a child of ours running ipyparallel.controller; its
        argv names no cluster id) with its schedulers, which are processes of their own."""
        return family(self.cluster.controller.pid)

    def stop(self) -> None:
        for stop in (self.client and self.client.close, self.cluster.stop_cluster_sync):
            with contextlib.suppress(Exception):
                stop and stop()
        shutil.rmtree(self.profile, ignore_errors=True)


def start_ours(shell, n: int) -> dict:
    from mlp_magic.world.world import World

    original, ready = World.start, []

    def timed_start(self):
        try:
            return original(self)
        finally:
            ready.append(time.perf_counter())

    World.start, begun = timed_start, time.perf_counter()
    try:
        first = timed_cell(shell, f"%%mpirun -np {n} --oversubscribe\npass")
    except RuntimeError as err:
        return {"error": str(err)[:300]}
    finally:
        World.start = original
    return {"first_result_s": round(first, 3), "world_started_s": round(ready[0] - begun, 3)}


def measure(run, trees: dict, counts: list) -> dict:
    from mlp_magic.output import logs

    before = {name: tree_cpu(processes) for name, processes in trees.items()}
    msgs0, kernel0, started = tuple(counts), time.process_time(), time.perf_counter()
    run()
    wall = time.perf_counter() - started
    logs._writer.submit(int).result()  # ours writes a cell's logs in a thread: its CPU is this cell's
    kernel, msgs1 = time.process_time() - kernel0, tuple(counts)
    return {"wall": wall, "kernel": kernel, "sent": msgs1[0] - msgs0[0], "received": msgs1[1] - msgs0[1],
            **{name: tree_cpu(processes) - before[name] for name, processes in trees.items()}}


def summarise(samples: list, n: int) -> dict:
    mean = lambda key, scale=1.0: round(sum(x[key] for x in samples) / len(samples) * scale, 3)  # noqa: E731
    return {"wall_median_s": round(statistics.median(x["wall"] for x in samples), 5),
            "kernel_cpu_per_cell_ms": mean("kernel", 1e3),
            "controller_cpu_per_cell_ms": mean("controller", 1e3),
            "cpu_per_rank_per_cell_ms": round(mean("kernel", 1e3 / n) + mean("controller", 1e3 / n), 3),
            "engines_cpu_per_rank_per_cell_ms": mean("engines", 1e3 / n),
            "msgs_sent_per_cell": mean("sent"), "msgs_received_per_cell": mean("received"),
            "msgs_per_cell": round(mean("sent") + mean("received"), 3)}


def interleaved(sides: dict, cells: int, n: int) -> dict:
    """sides: name -> (run, process trees, message counts); warmed, then run in turns."""
    for _ in range(WARM_CELLS):
        for run, _, _ in sides.values():
            run()
    samples = {name: [] for name in sides}
    for _ in range(cells):
        for name, (run, trees, counts) in sides.items():
            samples[name].append(measure(run, trees, counts))
    return {name: summarise(found, n) for name, found in samples.items()}


def run_one(shell, n: int, cells: int, timeout: float) -> dict:
    from mlp_magic.world.owner import owner_of

    figures = {"ranks": n, "cells": cells}
    peer = Peer(n, timeout)
    try:
        figures["peer_start"] = peer.start()
        if INTERRUPTED:
            raise KeyboardInterrupt
        if peer.error:
            print(f"  N={n}: peer failed: {peer.error}", flush=True)
            peer.stop()
        background = [] if peer.error else peer.controller() + family(peer.launcher)
        cpu_before = tree_cpu(background)
        figures["other_mlp_engines_at_our_start"] = others = sum(  # none is ours yet
            "mlp_magic.engine.main" in (p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))
        if others:  # they share this host's start slots (engine.main): our start waits for theirs
            print(f"  N={n}: {others} mlp_magic engines of someone else are running", flush=True)
        figures["ours_start"] = start_ours(shell, n)
        figures["peer_cpu_during_our_start_s"] = round(tree_cpu(background) - cpu_before, 2)
        world = owner_of(shell).world
        if world is not None:
            figures.update(measure_started(shell, world, peer, cells, n))
        return figures
    except Exception as err:  # one N going wrong is its result; the next N still runs
        if INTERRUPTED:
            raise KeyboardInterrupt from err
        figures["error"] = f"{type(err).__name__}: {err}"[:500]
        print(f"  N={n}: {figures['error']}", flush=True)
        return figures
    finally:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut this short
        try:
            owner_of(shell).stop()
            peer.stop()
            figures["stray_after_stop"] = sweep()
        finally:
            signal.signal(signal.SIGINT, previous)


def measure_started(shell, world, peer: Peer, cells: int, n: int) -> dict:
    ours = {"controller": family(world.processes[0].pid), "engines": family(world.processes[1].pid)}
    sides = {"ours": (lambda: timed_cell(shell, "%%mpirun\npass"), ours,
                      count_messages(world.client.session))}
    figures = {"ours_memory": memory_per_rank(world.processes[1].pid)}
    weight = per_engine(world, FLOOR["names"])   # before any cell (the start's own first cell aside)
    figures["ours_engines"] = {key: weight[key] for key in ("modules", "rss_mib", "start_cpu_s")}
    if peer.error:
        # No peer cluster to compare with (it did not start): %%px and the broadcast view then
        # run on our engines, through our controller and a Client of their own. That flatters the
        # peer (our engines' quiet replies, our one-level broadcast scheduler), so the ratios
        # taken against it are upper bounds of ours.
        from mlp_magic.client.quiet_replies import complete_quiet_outputs

        client = ipyparallel.Client(world.client_file)
        complete_quiet_outputs(client)   # our engines' replies say when they printed nothing
        client.wait_for_engines(n, timeout=60)
        both = (ours, count_messages(client.session))
        figures["px_and_broadcast_on"] = "our engines (the peer did not start)"
        names = ("px_on_ours", "broadcast_on_ours")
    else:
        client = peer.client
        both = ({"controller": peer.controller(), "engines": family(peer.launcher)},
                count_messages(client.session))  # one client for px and broadcast
        figures["px_and_broadcast_on"] = "the peer's engines"
        names = ("px", "broadcast")
        figures["peer_memory"] = memory_per_rank(peer.launcher)
    client[:].activate()  # %%px on those engines
    broadcast = client.broadcast_view()
    sides[names[0]] = (lambda: timed_cell(shell, "%%px --block\npass"), *both)
    sides[names[1]] = (lambda: broadcast.execute("pass", block=True), *both)
    try:
        figures["per_cell"] = interleaved(sides, cells, n)
    finally:
        if client is not peer.client:
            client.close()
    return figures


RATIOS = {  # name: (ours, the peer's), paths in one N's figures
    "start_ratio": ("ours_start.first_result_s", "peer_start.first_result_s"),
    "wall_ratio_vs_broadcast": ("per_cell.ours.wall_median_s", "per_cell.broadcast.wall_median_s"),
    "wall_ratio_vs_px": ("per_cell.ours.wall_median_s", "per_cell.px.wall_median_s"),
    "cpu_ratio_vs_px": ("per_cell.ours.cpu_per_rank_per_cell_ms", "per_cell.px.cpu_per_rank_per_cell_ms"),
    "memory_ratio_pss": ("ours_memory.pss_mib", "peer_memory.pss_mib"),
    "engine_modules_ratio": ("ours_engines.modules.median", "floor_modules"),
    # only where the peer did not start: ipyparallel's client paths on our engines (not goals)
    "wall_ratio_vs_broadcast_on_ours": ("per_cell.ours.wall_median_s",
                                        "per_cell.broadcast_on_ours.wall_median_s"),
    "cpu_ratio_vs_px_on_ours": ("per_cell.ours.cpu_per_rank_per_cell_ms",
                                "per_cell.px_on_ours.cpu_per_rank_per_cell_ms")}


def dig(figures: dict, path: str):
    for key in path.split("."):
        figures = figures.get(key) if isinstance(figures, dict) else None
    return figures


def add_ratios(figures: dict) -> None:
    for name, (ours, peer) in RATIOS.items():
        a, b = dig(figures, ours), dig(figures, peer)
        figures[name] = round(a / b, 3) if a is not None and b else None


def goals(results: list) -> dict:
    """Each goal: True, False, or None where nothing measured it. A peer that did not start
    while ours did counts as a start ratio of 0."""
    alone = lambda r: dig(r, "peer_start.error") and dig(r, "ours_start.first_result_s")  # noqa: E731
    verdicts = {}
    for name, (key, counts, limit) in GOALS.items():
        values = [0.0 if key == "start_ratio" and alone(r) else r.get(key)
                  for r in results if counts is None or r["ranks"] in counts]
        values = [value for value in values if value is not None]
        verdicts[name] = all(value <= limit for value in values) if values else None
    return verdicts


COLUMNS = [  # heading, where in one N's figures, scale
    ("start ours s", "ours_start.first_result_s", 1), ("peer", "peer_start.first_result_s", 1),
    ("ratio", "start_ratio", 1), ("cell ours ms", "per_cell.ours.wall_median_s", 1e3),
    ("px", "per_cell.px.wall_median_s", 1e3), ("bcast", "per_cell.broadcast.wall_median_s", 1e3),
    ("/bcast", "wall_ratio_vs_broadcast", 1), ("/px", "wall_ratio_vs_px", 1),
    ("bcast on ours ms", "per_cell.broadcast_on_ours.wall_median_s", 1e3),
    ("/it", "wall_ratio_vs_broadcast_on_ours", 1),
    ("cpu/rank/cell ours ms", "per_cell.ours.cpu_per_rank_per_cell_ms", 1),
    ("px", "per_cell.px.cpu_per_rank_per_cell_ms", 1), ("ratio", "cpu_ratio_vs_px", 1),
    ("px on ours", "per_cell.px_on_ours.cpu_per_rank_per_cell_ms", 1),
    ("ratio", "cpu_ratio_vs_px_on_ours", 1),
    ("engines cpu/rank/cell ours ms", "per_cell.ours.engines_cpu_per_rank_per_cell_ms", 1),
    ("px", "per_cell.px.engines_cpu_per_rank_per_cell_ms", 1),
    ("msgs ours", "per_cell.ours.msgs_per_cell", 1), ("px", "per_cell.px.msgs_per_cell", 1),
    ("bcast", "per_cell.broadcast.msgs_per_cell", 1), ("PSS/rank ours MiB", "ours_memory.pss_mib", 1),
    ("modules/engine ours", "ours_engines.modules.median", 1), ("/floor", "engine_modules_ratio", 1),
    ("peer", "peer_memory.pss_mib", 1)]


def print_table(results: list) -> None:
    fmt = lambda value, scale: "-" if value is None else f"{value * scale:.3g}"  # noqa: E731
    print(" | ".join(["N"] + [head for head, _, _ in COLUMNS]))
    for r in results:
        print(" | ".join([str(r["ranks"])] + [fmt(dig(r, path), scale) for _, path, scale in COLUMNS]))
        for path in ("peer_start.error", "ours_start.error", "error"):
            if dig(r, path):
                print(f"   N={r['ranks']}: {path}: {dig(r, path)}")


def on_interrupt(signum, frame):
    INTERRUPTED.append(signum)
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default=[4, 16, 64, 128], help="comma-separated rank counts",
                        type=lambda text: [int(part) for part in text.split(",") if part.strip()])
    parser.add_argument("--cells", type=int, help="cells per side (default: 30, 20 from 64, 10 from 128)")
    parser.add_argument("--peer-timeout", type=float, default=600, help="the peer's engine_timeout (s)")
    options = parser.parse_args()
    # Our Worlds' logs and published state, out of everyone else's way (removed at the end).
    own_home = None if "MLP_MAGIC_HOME" in os.environ else tempfile.mkdtemp(prefix="mlp-scale-")
    os.environ.setdefault("MLP_MAGIC_HOME", own_home)
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, on_interrupt)
    results, interrupted = [], False
    try:
        from IPython.testing.globalipapp import start_ipython

        shell = start_ipython()
        FLOOR.update(floor(FLOORS["floor"]))
        shell.run_line_magic("load_ext", "mlp_magic")
        for n in options.ranks:
            cells = options.cells or (30 if n < 64 else 20 if n < 128 else 10)
            print(f"N={n}: starting both, then {cells} cells per side ...", flush=True)
            figures = run_one(shell, n, cells, options.peer_timeout)
            figures["floor_modules"] = FLOOR["modules"]
            add_ratios(figures)
            results.append(figures)
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: stopping everything", flush=True)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stray = sweep()
        if own_home:
            shutil.rmtree(own_home, ignore_errors=True)
    report(results, stray, interrupted)


def report(results: list, stray: list, interrupted: bool) -> None:
    print_table(results)
    verdicts = goals(results)
    for name, verdict in verdicts.items():
        word = "not measured" if verdict is None else "pass" if verdict else "FAIL"
        print(f"goal {name} (<= {GOALS[name][2]}): {word}")
    left = descendants()
    print(f"processes left at the end: {len(left)} (stopped by the final sweep: {len(stray)})")
    print(json.dumps({"benchmark": "scale", "interrupted": interrupted, "results": results,
                      "goals": {name: f"<= {limit}" for name, (_, _, limit) in GOALS.items()},
                      "meets_goals": verdicts, "stray_at_end": stray, "left_at_end": len(left)}))
    if interrupted:
        raise SystemExit(130)


if __name__ == "__main__":
    main()
