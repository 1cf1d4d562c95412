"""In each rank: what torch.distributed's default process group is, read from the live one, so
that an unblock can make it again (unblock/rank/regroup) or keep it before NCCL's abort forgets it
(unblock/rank/side).

Private torch names read, each guarded (a torch without them says so, changes nothing):
``distributed_c10d._get_default_store``, ``_world.pg_names`` / ``pg_group_ranks`` /
``pg_backend_config``, ``ProcessGroup._get_backend(device).options._timeout``.
"""
from __future__ import annotations

import sys


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


def _timeout(group):
    """The group's collective timeout, or None (torch's default) where torch hides it."""
    import torch

    try:
        return group._get_backend(torch.device("cpu")).options._timeout
    except (AttributeError, RuntimeError):
        return None
