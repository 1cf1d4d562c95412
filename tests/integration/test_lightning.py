"""Lightning in a World, with the user's code as Lightning's own quick starts write it: Fabric and
the Trainer under ``strategy="ddp"`` run as on a job mpiexec started (Lightning's MPI environment:
it starts no process); under ``"deepspeed"`` they pick that environment alike (they run on CUDA
only: not here). Before, both refused on every rank: "not compatible with an interactive
environment", since IPython sets ``sys.ps1`` on the ranks (engine/main.no_prompt_here)."""
import re

import pytest

from tests.integration.conftest import printed_by_rank, run

pytest.importorskip("lightning", reason="lightning is in the test extra: `pip install -e '.[test]'`")

FABRIC = """%%mpirun -o fabric_out
import torch, lightning as L
fabric = L.Fabric(accelerator="cpu", strategy="ddp", devices=4, num_nodes=1)
fabric.launch()
torch.manual_seed(fabric.global_rank)   # different data on every rank: DDP averages the gradients
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
for _ in range(3):
    loss = model(torch.randn(8, 4)).sum()
    fabric.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
print(fabric.global_rank, fabric.world_size, round(float(model.weight.detach().sum()), 5))
"""

# The strategies Lightning runs on CUDA only (deepspeed; fsdp refuses a CPU before anything else):
# no GPU here, so what is checked is the World's part, the environment Lightning picks for them
ON_CUDA = """%%mpirun -o environments_out
import lightning as L
fabric = L.Fabric(accelerator="cpu", strategy="deepspeed", devices=4, num_nodes=1)
trainer = L.Trainer(accelerator="cpu", strategy="deepspeed", devices=4, num_nodes=1, logger=False)
for strategy in (fabric.strategy, trainer.strategy):
    env = strategy.cluster_environment
    print(type(strategy).__name__, type(env).__name__, env.creates_processes_externally,
          env.global_rank(), env.world_size(), env.local_rank())
"""

TRAINER = """%%mpirun -o trainer_out
import tempfile
import torch, lightning as L
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

class LitAutoEncoder(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 28 * 28))

    def training_step(self, batch, batch_idx):
        x, = batch
        loss = nn.functional.mse_loss(self.decoder(self.encoder(x)), x)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)

torch.manual_seed(0)
autoencoder = LitAutoEncoder()
data = DataLoader(TensorDataset(torch.rand(64, 28 * 28)), batch_size=8)
trainer = L.Trainer(accelerator="cpu", strategy="ddp", devices=4, max_steps=3, logger=False,
                    enable_checkpointing=False, default_root_dir=tempfile.mkdtemp())
trainer.fit(autoencoder, data)
print(trainer.global_rank, trainer.world_size, trainer.global_step,
      round(float(sum(p.detach().sum() for p in autoencoder.parameters())), 4))
"""


@pytest.mark.slow
def test_fabric_under_ddp_runs_on_every_rank_as_under_mpiexec(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, FABRIC) is None, capsys.readouterr().out[-3000:]
    printed = printed_by_rank(ip.user_ns["fabric_out"], same_from=2)
    assert [p[:2] for p in printed] == [[str(rank), "4"] for rank in range(4)]


@pytest.mark.slow
def test_the_deepspeed_strategy_finds_the_ranks_as_ddp_does(fresh_world, capsys):
    pytest.importorskip("deepspeed", reason="deepspeed is in the test extra: `pip install -e '.[test]'`")
    ip = fresh_world
    assert run(ip, ON_CUDA) is None, capsys.readouterr().out[-3000:]
    for rank, result in enumerate(ip.user_ns["environments_out"]):   # Fabric's, then the Trainer's
        expected = f"DeepSpeedStrategy MPIEnvironment True {rank} 4 {rank}"
        found = [line for line in result.stdout.splitlines() if "Strategy" in line]
        assert found == [expected, expected], result.stdout


@pytest.mark.slow
def test_the_trainer_under_ddp_fits_on_every_rank_and_ipython_is_as_it_was(fresh_world, capsys):
    ip = fresh_world
    cell = ip.run_cell(TRAINER)
    assert cell.status == "ok", cell.shown[-3000:]
    printed = printed_by_rank(ip.user_ns["trainer_out"], same_from=2)
    assert [p[:3] for p in printed] == [[str(rank), "4", "3"] for rank in range(4)]
    # Lightning's bar (rank 0's; rich's live display where rich is installed, which clears and draws
    # again, else tqdm's notebook widget) is one display in the notebook, redrawn while the cell
    # ran, and it ends as the bar ended: not every frame, not its start
    assert re.findall(r"^\[rank 0\] (Epoch \d)", cell.shown, re.M) == ["Epoch 1"], cell.shown[-3000:]
    # IPython on the ranks is as before: the last expression is shown, a magic runs
    capsys.readouterr()
    assert run(ip, "%%mpirun\n%load_ext autoreload\nimport sys\n(hasattr(sys, 'ps1'), 6 * 7)") is None
    assert "(False, 42)" in capsys.readouterr().out
