"""What a rank is told at its set-up (engine/bootstrap): torch.distributed's variables and the
names a cell sees, from its row of the World's layout; at the start, and for a respawned rank."""
from __future__ import annotations

import os

from mlp_magic.world.pure.tf_config import tf_config, tf_workers


def rank_variables(world, row) -> tuple:
    """({variable: value}, {name: value}) for the rank of ``row``; ``world.master`` is set."""
    master_addr, master_port = world.master
    variables = {
        "RANK": row.rank, "WORLD_SIZE": world.np, "LOCAL_RANK": row.local_rank,
        "LOCAL_WORLD_SIZE": row.local_world_size, "NODE_RANK": row.node_rank,
        "GROUP_RANK": row.node_rank, "MASTER_ADDR": master_addr, "MASTER_PORT": master_port,
    }
    if world.spec.topology.is_local:
        variables["GLOO_SOCKET_IFNAME"] = os.environ.get("GLOO_SOCKET_IFNAME", "lo")
    workers = tensorflow_workers(world)
    if workers:
        variables["TF_CONFIG"] = tf_config(workers, row.rank)
    names = {"rank": row.rank, "world_size": world.np, "local_rank": row.local_rank,
             "node_rank": row.node_rank}
    return variables, names


def tensorflow_workers(world) -> list:
    """Each rank a TensorFlow worker at its host's address (the one facing the kernel, as
    MASTER_ADDR) and a port that was free there at the start; [] where a rank's identity lacks
    it (a World kept by an older mlp_magic)."""
    identities = [world.identities.get(row.rank, {}) for row in world.layout]
    ports = [identity.get("tf_port") for identity in identities]
    if None in ports:
        return []
    local = world.spec.topology.is_local
    addresses = ["127.0.0.1" if local else identity.get("addr") for identity in identities]
    return tf_workers(addresses, ports)
