"""In each rank, for ``%mpirun --respawn`` (Open MPI with ULFM): the live ranks and new processes
for the dead ones become one communicator again, in the World's rank order.

The live ranks shrink the communicator that stands for the World (the dead leave it), spawn one
process per dead rank from the lowest of them (``MPI_Comm_spawn_multiple``: each on its dead
rank's host, told in its environment which rank it stands for, since its launcher's variables say
rank 0 of a job of 1), and merge with them; each new process merges with its parent job. A split
keyed by rank orders the merged communicator as the World was. COMM_WORLD itself cannot be
repaired: the new communicator is ``comm`` on every rank, and what stands for the World from then
on (unblock/rank/mpi_world). A spawned process is the same engine program as its parents: it
registers with the World's controller on its own, and the kernel maps it by the rank it reports.
"""
from __future__ import annotations

import os
import sys

from mlp_magic.core.rank_variables import RESPAWNED_RANK, RESPAWNED_SIZE
from mlp_magic.unblock.rank import mpi_world

# What a spawned engine on another host needs and does not inherit there (the launcher's daemon
# there never had it): the controller's address, forwarded by name at the World's start.
CARRIED = ("IPP_CONNECTION_INFO",)


def spawned_environment(rank: int, size: int, environ=os.environ) -> str:
    """The environment a new process for ``rank`` gets (Open MPI's ``PMIX_ENVAR`` info key: one
    ``NAME=value`` per line)."""
    lines = [f"{RESPAWNED_RANK}={rank}", f"{RESPAWNED_SIZE}={size}"]
    lines += [f"{name}={environ[name]}" for name in CARRIED if name in environ and "\n" not in environ[name]]
    return "\n".join(lines)


def own_command(path: str = "/proc/self/cmdline") -> list:
    """This engine's command line as it was started (engine/main rewrites ``sys.argv``)."""
    with open(path, "rb") as handle:
        return [os.fsdecode(word) for word in handle.read().rstrip(b"\0").split(b"\0")]


def spawn_dead(dead_hosts: dict, size: int, rank: int) -> dict:
    """On every live rank at once: new processes for the ranks of ``dead_hosts`` ({rank: host, or
    None for the spawning rank's own}), then one communicator of all ``size`` ranks, ordered by
    rank (this one is ``rank``); {"size", "rank"}, or {"error"} where MPI cannot (no ULFM)."""
    world = mpi_world.world_communicator()
    if world is None:
        return {"error": "mpi4py not initialised with ULFM on in this rank"}
    MPI = sys.modules["mpi4py.MPI"]
    live = world.Shrink()
    order = sorted(dead_hosts)
    command = args = counts = infos = None
    if live.Get_rank() == 0:   # the lowest live rank spawns; MPI ignores the others' arguments
        argv = own_command()
        command, args, counts = [sys.executable] * len(order), [argv[1:]] * len(order), [1] * len(order)
        infos = [_info(MPI, dead_hosts[dead], spawned_environment(dead, size)) for dead in order]
    children = live.Spawn_multiple(command, args, counts, infos or MPI.INFO_NULL, root=0)
    joined = children.Merge(high=False).Split(0, rank)
    mpi_world.stand_for_world(joined)
    return {"size": joined.Get_size(), "rank": joined.Get_rank()}


def _info(MPI, host: str | None, environment: str):
    info = MPI.Info.Create()
    if host:
        info.Set("host", host)
    info.Set("PMIX_ENVAR", environment)
    return info


def join_live_ranks(rank: int) -> dict:
    """On a new process (after its bootstrap's MPI_Init): merge with the live ranks that spawned it,
    as ``rank``; {"size", "rank"}, or {"error"} where this process was not spawned."""
    MPI = sys.modules.get("mpi4py.MPI")
    ready = MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized()
    parent = MPI.Comm.Get_parent() if ready else None
    if parent is None or parent == MPI.COMM_NULL:
        return {"error": "this process was not spawned by the live ranks"}
    joined = parent.Merge(high=True).Split(0, rank)
    mpi_world.stand_for_world(joined)
    return {"size": joined.Get_size(), "rank": joined.Get_rank()}
