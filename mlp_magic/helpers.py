"""Small helpers for code that runs on the ranks.

CUDA_VISIBLE_DEVICES is deliberately left alone per rank: hiding the other GPUs from a process
breaks NCCL's view of the node's topology (NVLink/P2P paths). Select the device instead.
"""
from __future__ import annotations

from mlp_magic.core.rank_variables import OWN_LOCAL_RANK
from mlp_magic.engine.identity import first_number


def local_rank() -> int:
    return first_number(OWN_LOCAL_RANK) or 0


def local_device():
    """This rank's torch device: ``cuda:<LOCAL_RANK % GPUs>`` (made current), else ``cpu``.

    ``model.to(local_device())`` and ``init_process_group("nccl")`` then use one GPU per rank.
    """
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return torch.device("cpu")
    index = local_rank() % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)
