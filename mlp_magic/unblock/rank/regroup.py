"""In each rank, after an unblock: torch.distributed's default process group again, with the same
backend, world size, rank and timeout, so that the next cell's collectives work with no code from
the user. The new group meets through the old one's store (rank 0's TCPStore still serves) under
a new prefix; the groups made with ``new_group`` are not re-made (the user's references to them
are stale) and are named instead.

What the group was is read by unblock/rank/default_group (private torch names, guarded there);
for NCCL, ``distributed_c10d._abort_process_group`` (unblock/rank/side).
"""
from __future__ import annotations

import os

from mlp_magic.unblock.rank import side
from mlp_magic.unblock.rank.default_group import group_config


def recreate_default_group(prefix: str) -> dict | None:
    """Destroy and re-make the default group (collective: every rank of it at once), meeting
    under ``prefix`` in the old store (the kernel's choice: the same on every rank); what was
    made, {"backend", "world_size", "stale": [[name, [ranks]]...]} or {"error": ...}; None where
    torch.distributed has no default group. After NCCL's abort there is none any more: what the
    unblock thread kept of it before (unblock/rank/side) is used."""
    config = group_config() or side.kept_group()
    if config is None or "error" in config:
        return config
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    if dist.is_initialized():
        dist.destroy_process_group()
    options = {"timeout": config["timeout"]} if config["timeout"] is not None else {}
    dist.init_process_group(config["backend"], store=c10d.PrefixStore(prefix, config["store"]),
                            rank=config["rank"], world_size=config["world_size"], **options)
    side.regrouped()   # only once made: a failed attempt keeps what a retry needs
    return {"backend": config["backend"], "world_size": config["world_size"], "stale": config["stale"]}


def group_to_remake() -> dict | None:
    """What a live rank's default group was ({"backend", "timeout"}), for making it again over a
    World whose dead ranks were respawned; None without one, {"error"} where torch hides it."""
    config = group_config() or side.kept_group()
    if config is None or "error" in config:
        return config
    return {"backend": config["backend"], "timeout": config["timeout"]}


def make_default_group(backend: str, timeout, address: str, port: int, rank: int, world_size: int) -> dict:
    """The default group made anew over every rank (collective), meeting at a new store on
    ``address:port`` (rank 0 serves it: the old store died with a dead rank 0); the respawned
    ranks have none before. MASTER_PORT says the new port from then on."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    options = {"timeout": timeout} if timeout is not None else {}
    dist.init_process_group(backend, init_method=f"tcp://{address}:{port}", rank=rank,
                            world_size=world_size, **options)
    side.regrouped()
    os.environ["MASTER_PORT"] = str(port)
    return {"backend": backend, "world_size": world_size, "stale": []}
