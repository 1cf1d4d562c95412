"""One rank of the doctor's link test (``python -m mlp_magic.doctor.links_rank``, started once per
rank by mpiexec, or as plain local processes): torch.distributed all_reduce, then send/recv
between the first ranks of each pair of hosts, round by round (``core/doctor_links.pair_rounds``).

Rank 0 prints one JSON line: {"backend", "ranks", "bytes", "seconds" (one all_reduce, the mean
of the timed ones), "pairs": [[leader a, leader b, bytes/s]]}; the others print nothing. A
failure prints {"error"} on whichever rank met it, and exits 1. NCCL on GPUs (each rank on
the GPU of its local rank) when every rank of a host has one, gloo otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta

from ..core.doctor_links import pair_rounds
from ..engine.identity import LOCAL_RANK_VARIABLES, launcher_rank

WARMUP, TIMED = 2, 5


def _options(argv):
    parser = argparse.ArgumentParser(prog="python -m mlp_magic.doctor.links_rank")
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--master", required=True, help="ADDR:PORT of rank 0's store")
    parser.add_argument("--bytes", type=int, default=16 << 20)
    parser.add_argument("--leaders", default="0", help="the first rank of each host, comma separated")
    parser.add_argument("--per-host", type=int, default=1, help="the most ranks any host runs")
    parser.add_argument("--timeout", type=float, default=60.0)
    return parser.parse_args(argv)


def _timed(torch, work, device, barrier=None) -> float:
    """Seconds of one ``work()``, the mean of TIMED runs after WARMUP (``barrier``: all ranks
    start the timed runs together)."""
    for _ in range(WARMUP):
        work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if barrier is not None:
        barrier()
    started = time.perf_counter()
    for _ in range(TIMED):
        work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - started) / TIMED


def _pairs(torch, dist, rank: int, leaders: list, tensor, device) -> list:
    """[[a, b, bytes/s]] measured by leader a (a ping-pong with b: 2 x bytes per round trip)."""
    found = []
    for round_pairs in pair_rounds(len(leaders)):
        for a, b in round_pairs:
            first, second = leaders[a], leaders[b]
            if rank not in (first, second):
                continue
            peer = second if rank == first else first

            def ping_pong():
                if rank == first:
                    dist.send(tensor, peer)
                    dist.recv(tensor, peer)
                else:
                    dist.recv(tensor, peer)
                    dist.send(tensor, peer)
            seconds = _timed(torch, ping_pong, device)
            if rank == first:
                found.append([first, second, 2 * tensor.numel() * tensor.element_size() / seconds])
        dist.barrier()
    return found


def run(options) -> dict:
    import torch
    import torch.distributed as dist

    rank = launcher_rank()
    if rank is None:
        raise RuntimeError("no rank: start it under mpiexec, or set MLP_MAGIC_RANK")
    # NCCL wants a GPU of its own per rank: more ranks on a host than GPUs measure gloo instead
    gpu = torch.cuda.is_available() and torch.cuda.device_count() >= options.per_host
    local = next((int(os.environ[n]) for n in LOCAL_RANK_VARIABLES if os.environ.get(n, "").isdigit()), 0)
    device = torch.device("cuda", local % max(1, torch.cuda.device_count())) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    backend = "nccl" if gpu else "gloo"
    dist.init_process_group(backend, init_method=f"tcp://{options.master}", rank=rank, world_size=options.np,
                            timeout=timedelta(seconds=options.timeout))
    try:
        tensor = torch.ones(max(1, options.bytes // 4), dtype=torch.float32, device=device)
        seconds = _timed(torch, lambda: dist.all_reduce(tensor), device, dist.barrier)
        leaders = [int(x) for x in options.leaders.split(",") if x]
        pairs = _pairs(torch, dist, rank, leaders, tensor, device) if len(leaders) > 1 else []
        gathered = [None] * options.np
        dist.all_gather_object(gathered, pairs)
        return {"rank": rank, "backend": backend, "ranks": options.np, "bytes": tensor.numel() * 4,
                "seconds": seconds, "pairs": [p for found in gathered for p in found]}
    finally:
        dist.destroy_process_group()


def main(argv=None) -> int:
    options = _options(sys.argv[1:] if argv is None else argv)
    try:
        result = run(options)
    except Exception as error:   # one line for the doctor's finding, never a traceback
        text = str(error).strip().splitlines()
        print(json.dumps({"error": f"rank {launcher_rank()}: {type(error).__name__}: "
                                   f"{text[0][:300] if text else ''}"}), flush=True)
        return 1
    if result["rank"] == 0:
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
