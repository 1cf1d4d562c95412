"""In each rank, after an unblock: torch.distributed's default process group again, with the same
backend, world size, rank and timeout, so that the next cell's collectives work with no code from
the user. The new group meets through the old one's store (rank 0's TCPStore still serves) under
a new prefix; the groups made with ``new_group`` are not re-made (the user's references to them
are stale) and are named instead.

Private torch names used, each guarded (a torch without them says so, changes nothing):
``distributed_c10d._get_default_store``, ``_world.pg_names`` / ``pg_group_ranks`` /
``pg_backend_config``, ``ProcessGroup._get_backend(device).options._timeout``; for NCCL,
``distributed_c10d._abort_process_group`` (unblock/rank/side).
"""
from __future__ import annotations

import sys

from mlp_magic.unblock.rank import side


def default_group() -> dict | None:
    """{"backend", "rank", "world_size"} of this rank's default process group, or None."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return {"backend": dist.get_backend(), "rank": dist.get_rank(), "world_size": dist.get_world_size()}


def group_config() -> dict | None:
    """What making the default group again needs, read from the live one: {"backend" (its config,
    "cpu:gloo,cuda:nccl"), "store", "rank", "world_size", "timeout", "stale"}; None where there
    is no default group; {"error": ...} where this torch hides it."""
    if default_group() is None:
        return None
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    try:
        world = dist.group.WORLD
        store = c10d._get_default_store()
        config = c10d._world.pg_backend_config.get(world) or dist.get_backend()   # "cpu:gloo,cuda:nccl"
        stale = [[str(name), sorted(c10d._world.pg_group_ranks.get(group, {}))]
                 for group, name in c10d._world.pg_names.items() if group is not world]
    except (AttributeError, RuntimeError) as missing:
        return {"error": f"this torch lacks what re-making the group needs ({missing})"}
    return {"backend": config, "store": store, "rank": dist.get_rank(), "world_size": dist.get_world_size(),
            "timeout": _timeout(world), "stale": stale}


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


def _timeout(group):
    """The group's collective timeout, or None (torch's default) where torch hides it."""
    import torch

    try:
        return group._get_backend(torch.device("cpu")).options._timeout
    except (AttributeError, RuntimeError):
        return None
