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

from mlp_magic import config
from mlp_magic.core.rank_variables import RESPAWNED_RANK, RESPAWNED_SIZE
from mlp_magic.engine.private_files import open_private, private_dirs
from mlp_magic.unblock.rank import mpi_world

# The controller's connection: on another host a spawned engine does not inherit it (the
# launcher's daemon there never had it), and an MPI info value holds at most 255 characters, so each
# live rank leaves it in a private file on its host, named on the new engine's command line.
CONNECTION = "IPP_CONNECTION_INFO"


def spawned_environment(rank: int, size: int, settings: dict) -> str:
    """The environment a new process for ``rank`` gets (Open MPI's ``PMIX_ENVAR`` info key: one
    ``NAME=value`` per line): its rank, and the MPI ``settings`` the World's ranks run with."""
    lines = [f"{RESPAWNED_RANK}={rank}", f"{RESPAWNED_SIZE}={size}"]
    return "\n".join(lines + [f"{name}={value}" for name, value in sorted(settings.items())])


def own_command(path: str = "/proc/self/cmdline") -> list:
    """This engine's command line as it was started (engine/main rewrites ``sys.argv``)."""
    with open(path, "rb") as handle:
        return [os.fsdecode(word) for word in handle.read().rstrip(b"\0").split(b"\0")]


def connection_path(token: str) -> str:
    return os.path.join(config.home(), "run", f"respawn-{token}.json")


def hand_over_connection(token: str, environ=os.environ) -> str | None:
    """The controller's connection from this rank's environment, in a file of this host only its
    owner reads; its path, or None where the engines start with a connection file (one host)."""
    if not environ.get(CONNECTION):
        return None
    path = connection_path(token)
    private_dirs(os.path.dirname(path))
    written = f"{path}.{os.getpid()}"   # the host's other live ranks write it too: whole or not at all
    with open_private(written) as handle:
        handle.write(environ[CONNECTION])
    os.replace(written, path)
    return path


def forget_connection(token: str) -> None:
    """The new engines have started (or never will): the file goes (any live rank of the host)."""
    try:
        os.unlink(connection_path(token))
    except FileNotFoundError:
        pass


def spawn_dead(dead_hosts: dict, size: int, rank: int, token: str, settings: dict) -> dict:
    """On every live rank at once: new processes for the ranks of ``dead_hosts`` ({rank: host, or
    None for the spawning rank's own}), then one communicator of all ``size`` ranks, ordered by
    rank (this one is ``rank``); {"size", "rank"}, or {"error"} (no ULFM; the spawn could not be
    prepared: every live rank returns, none is left waiting in MPI)."""
    world = mpi_world.world_communicator()
    if world is None:
        return {"error": "mpi4py not initialised with ULFM on in this rank"}
    handed = hand_over_connection(token)   # removed by the kernel once the new engines started
    live = world.Shrink()
    spawn, problem = (None, None)
    if live.Get_rank() == 0:
        spawn, problem = _prepared(sorted(dead_hosts), dead_hosts, size, handed, settings)
    problem = live.bcast(problem, root=0)   # the lowest live rank spawns: its failure is everyone's
    if problem:
        return {"error": problem}
    ignored = (None, None, None, sys.modules["mpi4py.MPI"].INFO_NULL)   # MPI reads the root's only
    children = live.Spawn_multiple(*(spawn or ignored), root=0)
    joined = children.Merge(high=False).Split(0, rank)
    mpi_world.stand_for_world(joined)
    return {"size": joined.Get_size(), "rank": joined.Get_rank()}


def _prepared(order: list, dead_hosts: dict, size: int, handed: str | None, settings: dict) -> tuple:
    """(Spawn_multiple's command, args, counts, infos), None; or None, what went wrong."""
    MPI = sys.modules["mpi4py.MPI"]
    try:
        args = own_command()[1:] + ([f"--file={handed}"] if handed else [])
        infos = [_info(MPI, dead_hosts[dead], spawned_environment(dead, size, settings)) for dead in order]
    except Exception as exc:   # noqa: BLE001 - said by every live rank, none left in MPI
        return None, f"{type(exc).__name__}: {exc}"
    return ([sys.executable] * len(order), [args] * len(order), [1] * len(order), infos), None


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
