"""How soon the panel sees a rank change state; one command: ``python benchmarks/live_latency.py``.

A real 4-rank World in this process (an IPython shell, ``%%mpirun``) publishes its live record;
a jupyter_server with mlp_magic's extension serves it. Watched at once by the live websocket (an
open panel) and by the peer, ``GET mlp-magic/cluster`` every 5 s (the panel before the websocket,
its fallback now). Each round runs a cell in which rank 2 sleeps ``--sleep`` s and the others
return at once, and times from the moment the cell was submitted to the first document showing
rank 2 busy, then from the cell's return to the first showing it idle (0: shown before). Each
round starts at a random point of the peer's period. Goal (issue 23): under 1 s.
Last line: one JSON object (medians and maxima of both, and the ratio of the medians).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import secrets
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_watch import Poller, SocketWatcher  # noqa: E402
from panel_load import free_loopback_port, start_server  # noqa: E402

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

NP = 4
SLOW_RANK = 2
GOAL_S = 1.0


class Sightings:
    """Every (monotonic time, state of rank ``SLOW_RANK``) each watcher saw, in order."""

    def __init__(self):
        self._lock = threading.Lock()
        self.seen: dict = {}

    def watcher(self, name: str):
        def on_doc(doc, when) -> None:
            mine = [w for w in doc.get("worlds", []) if w.get("pid") == os.getpid()]
            ranks = mine[0].get("ranks", []) if mine else []
            state = ranks[SLOW_RANK].get("state") if len(ranks) > SLOW_RANK else None
            with self._lock:
                self.seen.setdefault(name, []).append((when, state))
        return on_doc

    def first(self, name: str, state: str, after: float):
        with self._lock:
            return next((when for when, seen in self.seen.get(name, []) if seen == state and when >= after),
                        None)

    def wait(self, names, state: str, after: float, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and any(self.first(n, state, after) is None for n in names):
            time.sleep(0.01)


def quiet_cell(shell, cell: str) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        result = shell.run_cell(cell)
    if not result.success:
        raise SystemExit(f"cell failed: {cell!r}")


def one_round(shell, sight: Sightings, sleep_s: float, poll_s: float) -> dict:
    """This round's latencies: busy from the cell's submission, idle from the cell's return (the
    notebook shows the cell done: 0 when the panel already showed it idle)."""
    names = ("socket", "poll")
    time.sleep(random.uniform(0, poll_s))   # the peer's phase: anywhere in its period
    submitted = time.monotonic()
    quiet_cell(shell, f"%%mpirun\nimport time\nif rank == {SLOW_RANK}:\n    time.sleep({sleep_s})")
    returned = time.monotonic()
    sight.wait(names, "idle", returned - 0.5, poll_s + 2)
    latencies = {}
    for name in names:
        busy = sight.first(name, "busy", submitted)
        idle = sight.first(name, "idle", busy if busy is not None else submitted)
        latencies[f"{name}_busy"] = None if busy is None else round(busy - submitted, 3)
        latencies[f"{name}_idle"] = None if idle is None else round(max(0.0, idle - returned), 3)
    return latencies


def summary(rounds: list, key: str) -> dict:
    values = [r[key] for r in rounds if r[key] is not None]
    missed = len(rounds) - len(values)
    if not values:
        return {"median_s": None, "max_s": None, "missed": missed}
    return {"median_s": round(statistics.median(values), 3), "max_s": round(max(values), 3),
            "missed": missed}


def run(args) -> dict:
    from IPython.testing.globalipapp import start_ipython

    with tempfile.TemporaryDirectory(prefix="mlp-live-latency-") as tmp:
        home = Path(tmp)
        (home / "worlds").mkdir()
        os.environ["MLP_MAGIC_STATE_DIR"] = str(home / "worlds")
        hostfile = home / "hostfile"
        hostfile.write_text(f"localhost slots={NP}\n")
        port, token = free_loopback_port(), secrets.token_hex(16)
        server = start_server(home, hostfile, port, token, cache_seconds=4.0)
        shell = start_ipython()
        shell.run_line_magic("load_ext", "mlp_magic")
        sight = Sightings()
        base = f"http://127.0.0.1:{port}/"
        socket = SocketWatcher(base, token, sight.watcher("socket")).start()
        poller = Poller(base, token, args.poll, sight.watcher("poll")).start()
        try:
            quiet_cell(shell, f"%%mpirun -np {NP}\npass")   # the World
            quiet_cell(shell, "%%mpirun\npass")
            rounds = []
            for index in range(args.rounds):
                rounds.append(one_round(shell, sight, args.sleep, args.poll))
                print(f"round {index + 1}: {rounds[-1]}", flush=True)
        finally:
            socket.stop()
            poller.stop()
            with contextlib.redirect_stdout(io.StringIO()):
                shell.run_line_magic("mpirun", "--stop")
            server.terminate()
            server.wait(15)
    return report(rounds, args)


def report(rounds: list, args) -> dict:
    ours, peer = summary(rounds, "socket_busy"), summary(rounds, "poll_busy")
    ratio = (round(ours["median_s"] / peer["median_s"], 3)
             if ours["median_s"] is not None and peer["median_s"] else None)
    return {
        "busy_latency_s": ours, "peer_busy_latency_s": peer, "ratio": ratio,
        "idle_latency_s": summary(rounds, "socket_idle"),
        "peer_idle_latency_s": summary(rounds, "poll_idle"),
        "goal_s": GOAL_S,
        "meets_goal": ours["max_s"] is not None and ours["max_s"] < GOAL_S and ours["missed"] == 0,
        "rounds": len(rounds), "ranks": NP, "peer": f"GET mlp-magic/cluster every {args.poll:g} s",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--sleep", type=float, default=6.0, help="seconds rank 2 sleeps each round")
    parser.add_argument("--poll", type=float, default=5.0, help="the peer's polling period")
    args = parser.parse_args()
    if args.rounds < 1 or args.sleep <= args.poll:
        parser.error("--rounds must be >= 1 and --sleep longer than --poll (the peer must be able to see it)")
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
