"""``--unblock``'s NCCL path (unblock/rank/side.abort_nccl_groups, regroup from what was kept).
NCCL itself needs a GPU (none here: scripts/gpu_check runs it where one is lent); the abort
and the re-made group run here for real on a 1-rank gloo group, the one thing faked being that
its backend counts as NCCL."""
import socket
import subprocess
import sys

from mlp_magic.unblock.rank import side

ABORT_THEN_REGROUP = """
import torch, torch.distributed as dist
from mlp_magic.unblock.rank import regroup, side
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1)
side.uses_nccl = lambda backend: True   # the GPU's part: gloo stands for NCCL
side.unblock()
assert not dist.is_initialized() and side.unblocked() and side.kept_group()["world_size"] == 1
made = regroup.recreate_default_group("mlp_magic_unblock/test")
t = torch.ones(2)
dist.all_reduce(t)
print(made["backend"], made["world_size"], t.tolist(), side.unblocked(), side.kept_group(), flush=True)
dist.destroy_process_group()   # as a program ends one: a live group's threads at exit can abort it
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_aborted_group_is_made_again_from_what_was_kept(tmp_path):
    done = subprocess.run([sys.executable, "-c", ABORT_THEN_REGROUP.format(port=free_port())],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "cpu:gloo,cuda:gloo 1 [1.0, 1.0] False None"


def test_which_backends_have_nccl_communicators():
    assert side.uses_nccl("nccl") and side.uses_nccl("cuda:nccl") and side.uses_nccl("cpu:gloo,cuda:nccl")
    assert not side.uses_nccl("gloo") and not side.uses_nccl("cpu:gloo,cuda:gloo") and not side.uses_nccl("")


def test_the_watchdog_is_set_off_unless_the_user_chose():
    environ = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}
    assert side.prepare_environment(environ) == ["TORCH_NCCL_ENABLE_MONITORING"]
    assert environ == {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3", "TORCH_NCCL_ENABLE_MONITORING": "0"}
    assert side.prepare_environment(environ) == []
