"""The cell display's folding: live lines folded by template in a terminal, the folded summary."""
from __future__ import annotations

from mlp_magic.core.results import RankResult
from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.output import display


def chunks(ranks: int, step: int) -> list:
    return [(r, "stdout", f"step {step} loss {0.5 + r / 1000:.4f} rank {r}\n") for r in range(ranks)]


def test_live_lines_fold_by_template_in_a_terminal(capsys):
    live = display.StreamingOutput(fold=True)
    assert not live.notebook
    live.add(chunks(64, 1))
    live.add([(3, "stderr", "warn"), (3, "stderr", "ing 7\n")])   # a line in two pieces
    assert capsys.readouterr().out.splitlines() == ["[0] step 1 loss 0.5000 rank 0", "[3:err] warning 7"]


def test_without_fold_every_live_line_is_shown(capsys):
    live = display.StreamingOutput()
    live.add(chunks(64, 1))
    assert len(capsys.readouterr().out.splitlines()) == 64


def test_the_summary_folds_unless_told_otherwise():
    results = [RankResult(r, f"w{r // 4}", stdout=f"step 1 loss {0.5 + r / 1000:.4f} on cuda:{r % 4}\n")
               for r in range(8)]
    layout = topology_from_environment({}, hosts="w0:4,w1:4").layout(8)
    folded = display.summary(results, group=True, diff=False, footer="8 ranks", html_too=True, fold=True,
                             follows=display.rank_maps(layout))
    line = "step 1 loss {0.5000,0.5010,0.5020,0.5030,0.5040,0.5050,0.5060,0.5070} on cuda:{local_rank}"
    assert folded["text/plain"].splitlines()[1:] == [line, "8 ranks"]
    assert 'data-folded="1"' in folded["text/html"]
    for exact in (display.summary(results, group=True, diff=False, footer="", html_too=False),
                  display.summary(results, group=True, diff=True, footer="", html_too=False, fold=True),
                  display.summary(results, group=False, diff=False, footer="", html_too=False, fold=True)):
        assert exact["text/plain"].count("----------------") == 16 and "{" not in exact["text/plain"]
    assert display.rank_maps(layout)["node_rank"] == {r: r // 4 for r in range(8)}
