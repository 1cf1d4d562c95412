"""What checking a World's record as it is read costs (world/pure/record), at 4 to 512 ranks.

Run: ``python benchmarks/record_read.py`` (options: --repeat).
The server reads a World's record each time it changes: 4 times a second while 512 ranks flip.
Ours: the file's text read with numbers that are not finite as null (``finite_json``) and
checked (``sane_record``), as ``world/published`` does. The peer, in the same run on the same
text: a plain ``json.loads``, what every reader did before. Best of --repeat rounds each.
The last line printed is one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mlp_magic.world.pure.record import finite_json, sane_record  # noqa: E402

STARTED = 1795968383.67


def record(ranks: int) -> dict:
    """A running World's record as world/world.state writes it: 8 ranks a host, each host's agent."""
    since = "2026-11-25T10:00:00.000+00:00"
    rows = [{"rank": r, "host": f"w{r // 8}", "state": "busy", "since": since, "last_output": None,
             "engine_id": r} for r in range(ranks)]
    hosts = max(1, ranks // 8)
    return {"id": "w-1", "pid": 4321, "host": "w0", "state": "running", "np": ranks, "ranks": rows,
            "processes": [{"pid": 4400, "create_time": STARTED}, {"pid": 4401, "create_time": STARTED}],
            "agents": {f"w{h}": {"addr": f"10.0.0.{h + 1}", "port": 40000, "pid": 5000 + h}
                       for h in range(hosts)},
            "private": {"ranks": {str(r): [6000 + r, STARTED] for r in range(ranks)},
                        "groups": {str(r): [6000 + r, 6000 + r] for r in range(ranks)},
                        "agent_key": "ab" * 32, "keeper": [4500, STARTED], "workdir": "/run/w-1"},
            "kept": False, "keep_hours": 24, "idle_since": None, "gpus": {}, "cell": None,
            "log_dir": "/logs/w-1"}


def best_us(read, text: str, rounds: int) -> float:
    """The best of ``rounds`` rounds' mean time of one read, in microseconds."""
    reps = max(20, 40_000 // len(text) * 10)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(reps):
            read(text)
        times.append((time.perf_counter() - started) / reps)
    return min(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    figures = {}
    for ranks in (4, 16, 64, 128, 512):
        text = json.dumps(record(ranks))
        assert sane_record(finite_json(text)) == json.loads(text)   # a sound record reads as written
        ours = best_us(lambda t: sane_record(finite_json(t)), text, args.repeat)
        peer = best_us(json.loads, text, args.repeat)
        figures[ranks] = {"ours_us": round(ours, 1), "peer_us": round(peer, 1),
                          "ratio": round(ours / peer, 2)}
        print(f"{ranks:4} ranks: read and checked {ours:7.0f} us, json.loads {peer:7.0f} us, "
              f"ratio {ours / peer:.2f}, added per rank {(ours - peer) / ranks:.2f} us")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
