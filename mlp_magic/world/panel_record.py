"""A World's record as the panel and a later kernel read it (``mlp-magic/cluster``'s "worlds")."""

from __future__ import annotations

import os
import socket

from mlp_magic.world.keep import ownership


def world_record(world) -> dict:
    """A World's record for the panel (``mlp-magic/cluster``'s "worlds"; README's contract)."""
    live = world.live.record()
    engines = world.rank_to_engine
    for row in live["ranks"]:
        row["engine_id"] = engines.get(row["rank"])
    return {
        "id": world.id, "pid": os.getpid(), "host": socket.gethostname(),
        "state": "starting" if world.started_at is None else ("running" if world.alive() else "stopped"),
        "started_at": world.started_at, "np": world.np,
        "mpi": world.mpi.flavour if world.mpi else None, "source": world.spec.topology.source,
        "dead_ranks": sorted(world.dead_ranks),   # died; the others run on (ULFM)
        "cell": live["cell"], "log_dir": live["log_dir"], "ranks": live["ranks"], "gpus": world.gpus,
        "profile": live["profile"],   # the last %%mpirun --profile: lines, straggler, folder
        # What a later kernel needs to clean up after this one if it dies without stopping.
        "processes": [{"pid": p.pid, "create_time": p.create_time} for p in world.processes],
        # For the server's actions only (never served): which process each rank is.
        "agents": world.agents,
        "private": {"ranks": {rank: [i.get("pid"), i.get("create_time")]
                              for rank, i in world.identities.items()},
                    "groups": {r: [i.get("pgid"), i.get("sid")] for r, i in world.identities.items()},
                    "agent_key": world.agent_key, **ownership.private_fields(world)},
        **ownership.keep_fields(world),
    }
