"""Progress that moves: a tqdm loop on every rank of a World, one rank slower, through a real
kernel. While the cell runs the notebook's area shows one bar for the ranks, at their pace, the
slow rank named, updated at most twice a second. Before, the text bar showed nothing until each
rank's loop ended but garbled pieces of lines (a bar rewrites its line with ``\\r``, and so does
the client's copy of it), and the notebook bar (``tqdm.auto``: a widget) nothing at all, then its
first state, "0/40", when the cell ended."""
import re
import time

import pytest

from tests.integration.conftest import live_texts

LOOP = """%%mpirun
import time
from tqdm{module} import tqdm
for i in tqdm(range(40), desc="epoch 0"):
    time.sleep(0.15 if rank == 2 else 0.05)
"""
GROUP = re.compile(r"^epoch 0 (\d+)/40 \[[#-]{10}\] \| ranks 0-3(?:, slowest rank (\d) at (\d+)/40)?$", re.M)


@pytest.mark.slow
@pytest.mark.parametrize("module", ["", ".auto"], ids=["text", "notebook"])
def test_a_tqdm_loop_shows_one_moving_bar_for_all_ranks_with_the_slow_rank_named(fresh_world, module):
    ip = fresh_world
    began = time.monotonic()
    cell = ip.run_cell(LOOP.format(module=module))
    took = time.monotonic() - began
    assert cell.status == "ok", cell.shown[-3000:]
    live = live_texts(cell)
    groups = [GROUP.findall(text) for text in live]
    shown = [found[0] for found in groups if found]
    assert all(len(found) <= 1 for found in groups), live   # one line for the four ranks, never four
    assert len({int(n) for n, _, _ in shown}) >= 3, live    # it moved while the cell ran
    assert any(slowest == "2" and int(at) < int(n) for n, slowest, at in shown), live
    assert len(live) <= 2 * took + 2, (len(live), took)    # at most twice a second
    if module:   # rank 0's widget, shown when the cell ends, as it stands then
        assert re.search(r"^\[rank 0\] epoch 0: 100% \[#{10}\] 40/40 \[", cell.shown, re.M), cell.shown
    else:   # the summary keeps each rank's last bar
        assert "epoch 0: 100%|██████████| 40/40" in cell.shown, cell.shown


UPDATED = """%%mpirun
import time
from IPython.display import HTML, display
table = display(HTML("<progress value='0' max='8'></progress> step 0"), display_id=True)
for step in range(1, 9):
    time.sleep(0.4)
    table.update(HTML(f"<progress value='{step}' max='8'></progress> step {step}"))
"""


@pytest.mark.slow
def test_a_display_a_rank_updates_in_place_moves_while_the_cell_runs_and_ends_as_it_stands(fresh_world):
    """The Hugging Face Trainer's progress table is such a display; before, the notebook got its
    first state only ("step 0"), when the cell ended."""
    ip = fresh_world
    cell = ip.run_cell(UPDATED)
    assert cell.status == "ok", cell.shown[-3000:]
    drawn = re.compile(r"^(\d)/8 \[[#-]{10}\] \| ranks? [0-3]", re.M)   # one line for all ranks
    moved = {int(n) for text in live_texts(cell) for n in drawn.findall(text)}
    assert len(moved) >= 3, live_texts(cell)
    html = [out["data"]["text/html"] for out in cell.outputs if "text/html" in out.get("data", {})
            and "<progress" in out["data"]["text/html"]]
    assert html == ["<progress value='8' max='8'></progress> step 8"], cell.outputs   # rank 0's, as it ends


SHOWN_LIVE = """%%mpirun
import time
from IPython.display import HTML, clear_output, display
table = display(HTML(f"<b>step 0 of rank {rank}</b>"), display_id=True)
for step in range(1, 6):
    time.sleep(0.5)
    table.update(HTML(f"<b>step {step} of rank {rank}</b>"))
for frame in range(3):   # as rich's live display draws: clear, then the next frame
    clear_output(wait=True)
    display(HTML(f"<i>frame {frame}</i>"))
    time.sleep(0.5)
"""


@pytest.mark.slow
def test_rank_0s_displays_and_their_updates_reach_the_notebook_while_the_cell_runs(fresh_world):
    """Before, a rank's display reached the notebook only when the cell ended, as it stood then."""
    ip = fresh_world
    cell = ip.run_cell(SHOWN_LIVE)
    assert cell.status == "ok", cell.shown[-3000:]
    shown = [(m["msg_type"], m["content"]) for m in cell.messages
             if m["msg_type"] in ("display_data", "update_display_data")]
    ended = next(i for i, (_, content) in enumerate(shown)
                 if re.search(r"^4 ranks \| ", content["data"].get("text/plain", ""), re.M))
    html = [content["data"].get("text/html", "") for _, content in shown]
    steps = {int(n) for markup in html[:ended] for n in re.findall(r"step (\d) of rank 0", markup)}
    assert len(steps) >= 3, html[:ended]   # moved while the cell ran, not only at its end
    assert any("frame" in markup for markup in html[:ended]), html[:ended]
    assert not any("of rank 1" in markup for markup in html), html   # rank 0's only
    kept = [out["data"]["text/html"] for out in cell.outputs if "text/html" in out.get("data", {})
            and "<progress" not in out["data"]["text/html"] and "mlp-magic" not in out["data"]["text/html"]]
    # one slot, redrawn: rank 0's display as it stands at the end, no stale frame, no step left
    assert [markup for markup in kept if markup] == ["<i>frame 2</i>"], cell.outputs
