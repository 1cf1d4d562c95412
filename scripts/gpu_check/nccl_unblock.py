"""--unblock's NCCL path on one GPU (one GPU cannot host two NCCL ranks, so no real hang): a
1-rank NCCL group does an all_reduce (its communicator made), the rank's unblock action runs
from a side thread as the signal would run it (torch's _abort_process_group), then the group is
made again from what was kept, and an all_reduce works on it. Prints one line per step."""
import os
import threading

import torch
import torch.distributed as dist

from mlp_magic.unblock.rank import regroup, side

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29877")
side.prepare_environment()
print("environment:", {k: os.environ[k] for k in side.NCCL_ENVIRONMENT}, "nccl", torch.cuda.nccl.version())
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
t = torch.ones(4, device="cuda:0")
dist.all_reduce(t)
torch.cuda.synchronize()
print("first all_reduce:", t.tolist(), "backend", regroup.group_config()["backend"])
aborted = []
worker = threading.Thread(target=lambda: aborted.append(side.abort_nccl_groups()))
worker.start()
worker.join(60)
print("aborted from a side thread:", aborted, "initialized now:", dist.is_initialized())
made = regroup.recreate_default_group("mlp_magic_unblock/gpu-check")
t = torch.ones(4, device="cuda:0")
dist.all_reduce(t)
torch.cuda.synchronize()
print("made again:", made, "all_reduce:", t.tolist())
dist.destroy_process_group()
print("NCCL UNBLOCK PATH OK")
