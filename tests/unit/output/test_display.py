"""The cell display's folding: live lines folded by template in a terminal, the folded summary."""
from __future__ import annotations

from tqdm import tqdm

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


def bar(n: int, total: int = 50, desc: str = "epoch 0") -> str:
    return "\r" + tqdm.format_meter(n, total, 1.0, prefix=desc)


def test_bars_that_ranks_rewrite_are_one_line_per_group_in_a_terminal_never_each_rank_s(capsys):
    live = display.StreamingOutput(fold=True)
    live.add([(r, "stderr", bar(22 if r == 2 else 31)) for r in range(4)])
    assert capsys.readouterr().out.splitlines() == [
        "epoch 0 31/50 [######----] | ranks 0-3, slowest rank 2 at 22/50"]
    live.add([(r, "stderr", bar(40)) for r in range(4)])   # within 2 s of the last: not yet
    assert capsys.readouterr().out == ""
    live.add([(r, "stderr", bar(50) + "\n") for r in range(4)] + [(0, "stdout", "done\n")])
    assert capsys.readouterr().out.splitlines() == ["[0] done"]
    assert live.wake_at() is not None   # the bars moved: shown when due
    live._print_bars(force=True)
    assert capsys.readouterr().out.splitlines() == ["epoch 0 50/50 [##########] | ranks 0-3"]


def test_a_long_loop_keeps_only_the_bars_last_piece_in_memory():
    live = display.StreamingOutput(fold=True)
    for n in range(10_000):
        live.add([(0, "stderr", bar(n, 10_000))])
    assert len(live._partial[(0, "stderr")]) < 200
    assert live.bars.lines() == ["epoch 0 9999/10000 [#########-] | rank 0"]


def test_a_notebook_s_area_shows_the_bars_at_most_twice_a_second(monkeypatch):
    shown, now = [], [1000.0]

    class Handle:
        def update(self, bundle, raw):
            shown.append((now[0], bundle["text/plain"]))

    def first(bundle, raw, display_id):
        shown.append((now[0], bundle["text/plain"]))
        return Handle()

    monkeypatch.setattr(display, "display", first)
    monkeypatch.setattr(display.time, "monotonic", lambda: now[0])
    live = display.StreamingOutput(fold=True)
    live.notebook = True
    for step in range(100):   # 10 s of a loop that draws every 0.1 s on 4 ranks
        now[0] += 0.1
        live.add([(r, "stderr", bar(step // 2 if r == 2 else step // 2 + 1)) for r in range(4)])
    assert 19 <= len(shown) <= 21, len(shown)   # 2 a second, never more
    assert all(b - a >= 0.5 - 1e-9 for (a, _), (b, _) in zip(shown, shown[1:]))
    assert len({text for _, text in shown}) == len(shown)   # never frozen: each update moved
    now[0] = live.wake_at()   # what came last is shown when due (the cell's wait wakes then)
    live.add([])
    assert shown[-1][1] == "epoch 0 50/50 [##########] | ranks 0-3, slowest rank 2 at 49/50"
