"""One rank of the doctor's link test (``python -m mlp_magic.doctor.links_rank``, started once per
rank by mpiexec, or as plain local processes): an all_reduce, then send/recv between the first
ranks of each pair of hosts, round by round (``doctor/pure/links.pair_rounds``).

Rank 0 prints one JSON line: {"backend", "ranks", "bytes", "seconds" (one all_reduce, the mean
of the timed ones), "pairs": [[leader a, leader b, bytes/s]]}; the others print nothing. A
failure prints {"error"} on whichever rank met it, and exits 1.

Two ways to move the bytes (``--backend``, chosen once for every rank by doctor/links):
torch.distributed (NCCL on GPUs, each rank on the GPU of its local rank, when every rank of a
host has one; gloo otherwise), or the job's MPI through mpi4py (``mpi``: what mpi4py programs
use; ranks started by mpiexec only).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import timedelta

from mlp_magic.doctor.pure.links import pair_rounds
from mlp_magic.core.rank_variables import MPI_LOCAL_RANK
from mlp_magic.engine.identity import first_number, launched_by_mpi, launcher_rank

WARMUP, TIMED = 2, 5


def _options(argv):
    parser = argparse.ArgumentParser(prog="python -m mlp_magic.doctor.links_rank")
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--master", required=True, help="ADDR:PORT of rank 0's store")
    parser.add_argument("--bytes", type=int, default=16 << 20)
    parser.add_argument("--leaders", default="0", help="the first rank of each host, comma separated")
    parser.add_argument("--per-host", type=int, default=1, help="the most ranks any host runs")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--backend", choices=("torch", "mpi"), default="torch")
    return parser.parse_args(argv)


class TorchLinks:
    """torch.distributed: NCCL where every rank of a host has a GPU, gloo otherwise."""

    def __init__(self, options, rank: int):
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        if not dist.is_available():
            raise RuntimeError("torch.distributed is not available in this torch build "
                               "(--links-backend mpi measures the job's MPI)")
        # NCCL wants a GPU of its own per rank: more ranks on a host than GPUs measure gloo instead
        gpu = torch.cuda.is_available() and torch.cuda.device_count() >= options.per_host
        local = first_number(MPI_LOCAL_RANK) or 0
        self.device = torch.device("cuda", local % max(1, torch.cuda.device_count())) if gpu \
            else torch.device("cpu")
        if gpu:
            torch.cuda.set_device(self.device)
        self.backend = "nccl" if gpu else "gloo"
        self.tensor = torch.ones(max(1, options.bytes // 4), dtype=torch.float32, device=self.device)
        self.nbytes = self.tensor.numel() * 4
        dist.init_process_group(self.backend, init_method=f"tcp://{options.master}", rank=rank,
                                world_size=options.np, timeout=timedelta(seconds=options.timeout))

    def all_reduce(self) -> None:
        self.dist.all_reduce(self.tensor)

    def send(self, peer: int) -> None:
        self.dist.send(self.tensor, peer)

    def recv(self, peer: int) -> None:
        self.dist.recv(self.tensor, peer)

    def barrier(self) -> None:
        self.dist.barrier()

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def all_gather(self, value) -> list:
        gathered = [None] * self.dist.get_world_size()
        self.dist.all_gather_object(gathered, value)
        return gathered

    def close(self) -> None:
        self.dist.destroy_process_group()


class MpiLinks:
    """The job's MPI through mpi4py, on host memory (the buffers are float32, as torch's)."""

    def __init__(self, options, rank: int):
        if not launched_by_mpi():   # plain local processes: MPI_Init would make each a world of one
            raise RuntimeError("the MPI link test needs ranks started by mpiexec (no MPI found here)")
        from mpi4py import MPI

        self.MPI, self.comm = MPI, MPI.COMM_WORLD
        if self.comm.Get_size() != options.np or self.comm.Get_rank() != rank:
            raise RuntimeError(f"mpi4py sees rank {self.comm.Get_rank()} of {self.comm.Get_size()}, the "
                               f"launcher started rank {rank} of {options.np}: is mpi4py built for another "
                               "MPI than the job's mpiexec?")
        self.backend = "mpi"
        self.count = max(1, options.bytes // 4)   # float32s, as torch's tensor: counts stay under 2**31
        self.nbytes = self.count * 4
        self.send_buffer, self.recv_buffer = bytearray(self.nbytes), bytearray(self.nbytes)

    def all_reduce(self) -> None:
        self.comm.Allreduce([self.send_buffer, self.count, self.MPI.FLOAT],
                            [self.recv_buffer, self.count, self.MPI.FLOAT])

    def send(self, peer: int) -> None:
        self.comm.Send([self.send_buffer, self.count, self.MPI.FLOAT], dest=peer)

    def recv(self, peer: int) -> None:
        self.comm.Recv([self.recv_buffer, self.count, self.MPI.FLOAT], source=peer)

    def barrier(self) -> None:
        self.comm.Barrier()

    def sync(self) -> None:
        pass   # host memory: a call is done when it returns

    def all_gather(self, value) -> list:
        return self.comm.allgather(value)

    def close(self) -> None:
        pass   # mpi4py finalises MPI at exit


def open_links(options, rank: int):
    """The backend ``options.backend`` names."""
    return MpiLinks(options, rank) if options.backend == "mpi" else TorchLinks(options, rank)


def _timed(links, work, together: bool = False) -> float:
    """Seconds of one ``work()``, the mean of TIMED runs after WARMUP (``together``: all ranks
    start the timed runs at once)."""
    for _ in range(WARMUP):
        work()
    links.sync()
    if together:
        links.barrier()
    started = time.perf_counter()
    for _ in range(TIMED):
        work()
    links.sync()
    return (time.perf_counter() - started) / TIMED


def _pairs(links, rank: int, leaders: list) -> list:
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
                    links.send(peer)
                    links.recv(peer)
                else:
                    links.recv(peer)
                    links.send(peer)
            seconds = _timed(links, ping_pong)
            if rank == first:
                found.append([first, second, 2 * links.nbytes / seconds])
        links.barrier()
    return found


def run(options) -> dict:
    rank = launcher_rank()
    if rank is None:
        raise RuntimeError("no rank: start it under mpiexec, or set MLP_MAGIC_RANK")
    links = open_links(options, rank)
    try:
        seconds = _timed(links, links.all_reduce, together=True)
        leaders = [int(x) for x in options.leaders.split(",") if x]
        pairs = _pairs(links, rank, leaders) if len(leaders) > 1 else []
        gathered = links.all_gather(pairs)
        return {"rank": rank, "backend": links.backend, "ranks": options.np, "bytes": links.nbytes,
                "seconds": seconds, "pairs": [p for found in gathered for p in found]}
    finally:
        links.close()


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
