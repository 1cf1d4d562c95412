"""Every notebook in examples/ executes in a real kernel (nbclient) and shows what it promises."""
import glob
import os
import re

import pytest

from mlp_magic.demo import run_notebook

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
pytestmark = [pytest.mark.notebook, pytest.mark.timeout(600)]


def _outputs_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif output.get("output_type") == "error":
            parts.append(f"{output['ename']}: {output['evalue']}")
        else:
            parts.append((output.get("data") or {}).get("text/plain", ""))
    return "\n".join(parts)


def _cell(notebook, needle: str):
    matches = [c for c in notebook.cells if c.cell_type == "code" and needle in c.source]
    assert matches, f"no cell contains {needle!r}"
    return _outputs_text(matches[0])


def test_every_example_is_covered():
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(EXAMPLES, "*.ipynb")))
    covered = {"01-hello-ranks.ipynb", "02-torch-ddp.ipynb", "03-allrun.ipynb", "04-cluster-view.ipynb",
               "05-many-ranks.ipynb", "06-debug-a-rank.ipynb", "07-frameworks.ipynb"}
    assert set(names) <= covered, f"example without a test: {set(names) - covered}"


def test_hello_ranks():
    nb = run_notebook(os.path.join(EXAMPLES, "01-hello-ranks.ipynb"))
    hello = _cell(nb, "hello from")
    assert "ranks 0-3 (4) on localhost" in hello and hello.count("hello from") >= 1
    per_rank = _cell(nb, "local rank {local_rank}")   # folded: one line for the 4 ranks
    assert "rank {rank} of 4 (local rank {rank} on node 0)" in per_rank
    losses = _cell(nb, "float(\"nan\") if rank == 3")
    # three distinct finite values: listed (output/pure/fold/summary.MAX_LISTED_VALUES), nan named
    assert "step 10 loss {0.5000,0.5100,0.5200}\n  ! rank 3: loss nan" in losses
    exact = _cell(nb, "%%mpirun --no-fold")
    for r in range(4):
        assert f"---------------- rank {r} on localhost ----------------\nexactly: rank {r} of 4" in exact
    assert "sum of squares over 4 ranks: 30" in _cell(nb, "comm.allreduce")
    parity = _cell(nb, "parity")
    assert "ranks 0,2 (2) on localhost" in parity and "rank 3 on localhost" in parity
    assert "+rank 3 has one more line" in parity  # --diff against the majority
    failing = _cell(nb, "took another branch")
    assert "RuntimeError: rank 2 took another branch" in failing
    assert "RankFailure: error on ranks 2 (1 of 4)" in failing
    assert "ranks 0-1,3 (3) on localhost" in failing  # the others' output is kept
    assert "(0, 'ok', 'True')" in _cell(nb, "r.rank, r.status")
    assert "rank0.stdout" in _cell(nb, "os.listdir(result.log_dir)")
    assert "World of 4 ranks" in _cell(nb, "%mpirun --status")


def test_torch_ddp():
    nb = run_notebook(os.path.join(EXAMPLES, "02-torch-ddp.ipynb"))
    ready = _cell(nb, "init_process_group")
    assert "process group ready: rank {rank} of 4" in ready   # folded: one line for the 4 ranks
    losses = _cell(nb, "local loss after 20 steps")
    listed = re.search(r"local loss after 20 steps: \{([0-9.,]+)\}", losses)   # 4 values: listed
    values = [float(v) for v in listed.group(1).split(",")] if listed else []
    assert len(values) > 1 and max(values) < 0.05, losses   # trained, on per-rank data
    check = _cell(nb, "params identical")
    assert "params identical on all ranks: True" in check
    assert "ranks 0-3 (4) on localhost" in check


@pytest.mark.alone   # times allrun through the engines (under 2 s)
def test_allrun():
    nb = run_notebook(os.path.join(EXAMPLES, "03-allrun.ipynb"))
    assert "localhost (1)" in _cell(nb, "%allrun uname -s")
    assert "installed" in _cell(nb, "--force-reinstall")
    check = _cell(nb, "import mlp_hello")
    assert "hello from mlp_hello" in check and "Version: 0.1" in check
    assert "('localhost', 'ok', 0)" in _cell(nb, "r.exit_code) for r in check")
    failing = _cell(nb, "ls /no/such/directory")
    assert "[exit 2]" in failing and "HostFailure" in failing
    assert "[timeout]" in _cell(nb, "-t 1 sleep 30")
    fast = _cell(nb, "via_engines")
    seconds = float(re.search(r"through the engines: ([0-9.]+) s", fast).group(1))
    assert seconds < 2.0, fast
    assert '"status": "ok"' in _cell(nb, "allrun.command --json")
    assert "removed" in _cell(nb, "pip uninstall")


def test_debug_a_rank(monkeypatch):
    # as a container's root user runs it: without the variables the tests set for Open MPI as root
    # (issue 49: the job of "stacks of any job" then ended at once, and the tutorial showed nothing)
    monkeypatch.delenv("OMPI_ALLOW_RUN_AS_ROOT", raising=False)
    monkeypatch.delenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", raising=False)
    nb = run_notebook(os.path.join(EXAMPLES, "06-debug-a-rank.ipynb"))
    assert "RankFailure: error on ranks 3 (1 of 4)" in _cell(nb, "out = load(step=3)")
    where = _cell(nb, "%mpirun --where")
    assert "rank 3 on localhost" in where and "[frame 0] cell, line 6, in check" in where
    assert "limit: float = 5.0" in where and "[frame 1] cell, line 11, in load" in where
    assert "batch [3. 4. 5. 6.] limit 5.0 max 6.0" in _cell(nb, "'limit', limit")
    assert "step 3 rank 3" in _cell(nb, "--post-mortem --frame 1")
    assert "trained with lr 0.5: weight 0.125" in _cell(nb, "%mpirun $script --lr 0.5")
    assert "ranks 0-3 (4) on localhost" in _cell(nb, "%mpirun $script --lr 0.5")
    assert "after the script: weight 0.125 lr 0.5" in _cell(nb, "after the script")
    assert "['-c'] Namespace(lr=0.1, steps=3)" in _cell(nb, "sys.argv, parser.parse_args()")
    stacks = _cell(nb, "%mlp_stacks")
    assert "4 ranks of 4 on localhost" in stacks
    assert re.search(r"ranks 0-1,3 \(3\) on localhost: hang_demo.py:\d+ <module> > hang_demo.py:\d+ "
                     r"wait_in_barrier; rank 2 on localhost: hang_demo.py:\d+ <module> > hang_demo.py:\d+ "
                     r"sleeper", stacks), stacks
    assert "job stopped" in _cell(nb, "job.terminate()")
    import psutil

    left = [p.pid for p in psutil.process_iter(["cmdline"])
            if "hang_demo.py" in " ".join(p.info["cmdline"] or [])]
    assert left == [], "the example's job left ranks behind"


def test_many_ranks():
    nb = run_notebook(os.path.join(EXAMPLES, "05-many-ranks.ipynb"))
    losses = _cell(nb, "print('=== epoch 1 ===')")
    body = losses[losses.index("----------------"):].splitlines()
    assert body[:4] == ["---------------- ranks 0-15 (16) on localhost ----------------",
                        "[rank 0] === epoch 1 ===",
                        "step 10 loss {0.5000..0.5150 ~0.5070} rank {rank}",
                        "  ! rank 11: loss nan"]
    assert body[4].startswith("16 ranks | ")   # the 16-rank loss print in 4 lines
    exact = _cell(nb, "--no-fold --ranks 0-3")
    assert exact.count("---------------- rank ") == 4 and "step 10 loss 0.5030 rank 3" in exact
    error = _cell(nb, "shape mismatch")
    assert "ranks 0-15 (16) on localhost [error]" in error
    assert "RuntimeError: shape mismatch on rank {rank}: got {0..120} expected 128" in error
    compare = _cell(nb, "%mpirun --compare model.state_dict()")
    assert "ranks 0-6,8-15 (15 of 16) equal" in compare
    assert "rank 7 (1 of 16) differs in 1 of 4 keys" in compare
    assert re.search(r"1\.weight: max \|diff\| 0\.001\d* at \[1, 2\]", compare), compare
    assert "([(0, 0.5), (1, 0.501), (2, 0.502)], nan)" in _cell(nb, "losses = %mpirun --pull loss")
    # the size as cloudpickle writes a float
    assert "pushed lr (float, 21 B) to ranks 0-1" in _cell(nb, "%mpirun --push lr")
    assert "lr on this rank: 0.25" in _cell(nb, "print('lr on this rank:', lr)")


def test_frameworks():
    """The tutorial: one model trained with the Hugging Face Trainer, Lightning and DeepSpeed in one
    World, each with its progress, and the three models kept."""
    for framework in ("transformers", "lightning", "deepspeed"):
        pytest.importorskip(framework, reason="in the test extra: `pip install -e '.[test]'`")
    nb = run_notebook(os.path.join(EXAMPLES, "07-frameworks.ipynb"))
    assert "rank {rank} of 4: 512 examples" in _cell(nb, "class Regressor")
    trainer = [c for c in nb.cells if "Trainer(model=hf_model" in c.source][0]
    tables = [o["data"]["text/html"] for o in trainer.outputs
              if "<progress" in o.get("data", {}).get("text/html", "")]
    assert len(tables) == 1 and "<progress value='32' max='32'" in tables[0], tables   # as it ended
    assert re.findall(r"<td>(\d+)</td>", tables[0]) == ["8", "16", "24", "32"], tables[0]   # its losses
    assert re.search(r"^\[rank 0\] Epoch 1", _cell(nb, "L.Trainer("), re.M), _cell(nb, "L.Trainer(")
    assert "[rank 0] epoch 1: 100% [##########] 16/16" in _cell(nb, "deepspeed.initialize(")
    kept = _cell(nb, "for name, model in")
    assert "---------------- ranks 0-3 (4) on localhost ----------------" in kept   # one model on all
    losses = re.findall(r"^(Hugging Face|Lightning|DeepSpeed): test loss (\d\.\d+)$", kept, re.M)
    assert [name for name, _ in losses] == ["Hugging Face", "Lightning", "DeepSpeed"], kept
    assert all(float(loss) < 0.5 for _, loss in losses), kept   # about 3 before training


def test_the_demo_prints_the_grouped_outputs_and_no_warning_of_its_kernel():
    """The README's first command: its kernel talks over Unix sockets in a private folder, so
    ipykernel's warning of a kernel over TCP without encryption no longer opens the demo."""
    import subprocess
    import sys

    root = os.path.join(os.path.dirname(__file__), "..", "..")
    done = subprocess.run([sys.executable, "-m", "mlp_magic.demo"], cwd=root, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert "---------------- ranks 0-3 (4) on localhost ----------------" in done.stdout
    assert "without encryption" not in done.stderr + done.stdout, done.stderr
