"""Sharded data parallelism in a World, with the user's code as the quick starts write it:
DeepSpeed ZeRO-2 (``deepspeed.init_distributed()`` with no arguments reads the World's variables;
on CPU, DeepSpeed builds its shared-memory op once per machine: a minute, then cached) and
PyTorch's FSDP2 (``fully_shard``) on gloo. Each rank holds a shard, and the model is the same on
every rank after the steps."""
import pytest

from tests.integration.conftest import printed_by_rank, run

DEEPSPEED = """%%mpirun -o deepspeed_out
import torch, deepspeed
import torch.distributed as dist
deepspeed.init_distributed()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
config = {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2},
          "optimizer": {"type": "SGD", "params": {"lr": 0.1}}, "zero_allow_untested_optimizer": True}
engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                               config=config)
torch.manual_seed(dist.get_rank())   # different data on every rank
for _ in range(3):
    loss = engine(torch.randn(4, 8)).pow(2).mean()
    engine.backward(loss)
    engine.step()
shard = sum(part.numel() for part in optimizer.single_partition_of_fp32_groups)   # this rank's
print(dist.get_rank(), dist.get_world_size(), dist.get_backend(), engine.zero_optimization_stage(), shard,
      round(float(sum(p.detach().float().sum() for p in engine.module.parameters())), 4))
"""

FSDP2 = """%%mpirun -o fsdp_out
import torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
if not dist.is_initialized():
    dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
for layer in model:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer)
fully_shard(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
torch.manual_seed(dist.get_rank())   # different data on every rank
for _ in range(3):
    model(torch.randn(4, 8)).pow(2).mean().backward()
    optimizer.step()
    optimizer.zero_grad()
state = model.state_dict()
full = sum(float(value.full_tensor().sum()) for value in state.values())
print(dist.get_rank(), dist.get_world_size(), "x".join(map(str, state["0.weight"].to_local().shape)),
      round(full, 4))
"""

MODEL_SIZE = 8 * 16 + 16 + 16 * 1 + 1   # the two layers' weights and biases: 161


@pytest.mark.slow
def test_deepspeed_zero_2_shards_the_optimizer_state_across_the_ranks(fresh_world, capsys):
    pytest.importorskip("deepspeed", reason="deepspeed is in the test extra: `pip install -e '.[test]'`")
    ip = fresh_world
    assert run(ip, DEEPSPEED) is None, capsys.readouterr().out[-3000:]
    printed = printed_by_rank(ip.user_ns["deepspeed_out"], same_from=-1)
    assert [p[:4] for p in printed] == [[str(rank), "4", "gloo", "2"] for rank in range(4)], printed
    # ZeRO-2: each rank keeps a quarter of the fp32 parameters (padded to equal shards)
    assert all(MODEL_SIZE / 4 <= int(p[4]) < MODEL_SIZE / 4 + 4 for p in printed), printed


@pytest.mark.slow
def test_fsdp2_fully_shard_holds_a_shard_per_rank_and_trains_one_model(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, FSDP2) is None, capsys.readouterr().out[-3000:]
    printed = printed_by_rank(ip.user_ns["fsdp_out"], same_from=-1)
    # the first layer's 16x8 weight, a quarter of its rows on each rank
    assert [p[:3] for p in printed] == [[str(rank), "4", "4x8"] for rank in range(4)], printed
