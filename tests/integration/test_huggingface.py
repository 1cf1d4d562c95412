"""Hugging Face in a World, with the user's code as its own quick starts write it: accelerate and
the Trainer find the ranks through the World's variables (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ...; accelerate's MULTI_CPU on gloo here) and start no process. The Trainer's
notebook progress table (an HTML display it updates in place) moves while the cell runs and ends
as it stands, its losses in it; before, the notebook got the table as first drawn, "2/6" or less
and no loss, when the cell ended."""
import re

import pytest

from tests.integration.conftest import live_texts, printed_by_rank, run

pytest.importorskip("accelerate", reason="accelerate is in the test extra: `pip install -e '.[test]'`")
pytest.importorskip("transformers", reason="transformers is in the test extra: `pip install -e '.[test]'`")

ACCELERATE = """%%mpirun -o accelerate_out
import torch
from accelerate import Accelerator
accelerator = Accelerator(cpu=True)
torch.manual_seed(0)   # one dataset on every rank: the prepared loader gives each rank its share
data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(data, batch_size=4)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for x, y in loader:
    optimizer.zero_grad()
    accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
    optimizer.step()
print(accelerator.process_index, accelerator.num_processes, accelerator.distributed_type.value, len(loader),
      round(float(sum(p.detach().sum() for p in model.parameters())), 5))
"""

TRAINER = """%%mpirun -o trainer_out
import tempfile, torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=32,
                    bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config)
data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 100, (96, 16))]
args = TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=2, max_steps=12,
                         logging_steps=4, report_to=[], save_strategy="no", use_cpu=True)
trainer = Trainer(model=model, args=args, train_dataset=data)
trainer.train()
print(trainer.args.process_index, trainer.args.world_size, trainer.state.global_step,
      round(float(sum(p.detach().sum() for p in model.parameters())), 4))
"""


@pytest.mark.slow
def test_accelerate_runs_its_quick_start_on_every_rank_as_multi_cpu(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, ACCELERATE) is None, capsys.readouterr().out[-3000:]
    printed = printed_by_rank(ip.user_ns["accelerate_out"], same_from=2)
    # each rank trained on its quarter of the 16 batches
    assert [p[:4] for p in printed] == [[str(rank), "4", "MULTI_CPU", "4"] for rank in range(4)], printed


@pytest.mark.slow
def test_the_trainer_trains_on_every_rank_its_table_moving_and_ending_with_its_losses(fresh_world):
    ip = fresh_world
    cell = ip.run_cell(TRAINER)
    assert cell.status == "ok", cell.shown[-3000:]
    printed = printed_by_rank(ip.user_ns["trainer_out"], same_from=2)
    assert [p[:3] for p in printed] == [[str(rank), "4", "12"] for rank in range(4)], printed
    live = [line for text in live_texts(cell) for line in text.splitlines()]
    assert any(re.match(r"\d+/12 \[[#-]{10}\] \| ranks 0-3", line) for line in live), live   # one bar, moving
    tables = [out["data"]["text/html"] for out in cell.outputs
              if "<progress" in out.get("data", {}).get("text/html", "")]
    assert len(tables) == 1, tables   # rank 0's, as it stands when the cell ends
    assert re.search(r"<progress value='12' max='12'", tables[0]) and "[12/12" in tables[0], tables[0]
    steps = re.findall(r"<tr>\s*<td>(\d+)</td>\s*<td>(\d+\.\d+)</td>", tables[0])
    assert [step for step, _ in steps] == ["4", "8", "12"], tables[0]   # a logged loss every 4 steps
