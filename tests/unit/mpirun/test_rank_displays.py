"""What a cell keeps of its ranks' rich displays (mpirun/rank_displays): the progress they moved
to, once per move, and each display as it stands when the cell ends."""
from __future__ import annotations

from mlp_magic.mpirun.rank_displays import RankDisplays
from mlp_magic.output.pure.progress import Bar


def opened(model: str, **state) -> dict:
    return {"comm_id": model, "target_name": "jupyter.widget", "data": {"state": state}}


def test_a_widgets_progress_is_given_once_per_move_with_its_rank_not_its_index():
    displays = RankDisplays([4, 7])
    progress = opened("p", _model_name="IntProgressModel", value=1, max=5, description="fit")
    displays.take(1, "comm_open", progress)
    assert displays.new_bars() == [(7, Bar("fit", "1", "5"))]
    assert displays.new_bars() == []   # nothing moved since
    displays.take(1, "comm_msg", {"comm_id": "p", "data": {"method": "update", "state": {"value": 2}}})
    assert displays.new_bars() == [(7, Bar("fit", "2", "5"))]


def test_a_display_updated_in_place_ends_as_it_stands_and_its_progress_moves():
    displays = RankDisplays([0])
    first = {"data": {"text/html": "<progress value='0' max='6'></progress>"}, "metadata": {},
             "transient": {"display_id": "d1"}}
    other = {"data": {"text/plain": "a plot"}, "metadata": {}}
    displays.take(0, "update_display_data", {"data": {"text/html": "<progress value='4' max='6'></progress>"},
                                             "metadata": {}, "transient": {"display_id": "d1"}})
    assert displays.new_bars() == [(0, Bar("", "4", "6"))]
    shown = displays.shown(0, [first, other])
    assert shown[0]["data"] == {"text/html": "<progress value='4' max='6'></progress>"}
    assert shown[1] is other and first["data"]["text/html"].startswith("<progress value='0'")   # copies


def test_a_widgets_display_gets_its_text_as_it_stands():
    displays = RankDisplays([0])
    displays.take(0, "comm_open", opened("h", _model_name="HTMLModel", value="<b>epoch 3</b> done"))
    view = {"data": {"text/plain": "HTML(value='')",
                     "application/vnd.jupyter.widget-view+json": {"model_id": "h"}}}
    assert displays.shown(0, [view])[0]["data"]["text/plain"] == "epoch 3 done"
    assert view["data"]["text/plain"] == "HTML(value='')"


def test_a_rank_that_made_nothing_shows_its_displays_unchanged():
    plot = {"data": {"image/png": "..."}}
    assert RankDisplays([0, 1]).shown(1, [plot]) == [plot]


def test_displays_a_rank_cleared_are_left_out_and_a_drawn_bar_is_progress():
    """rich's live display (Lightning's RichProgressBar) clears its frame and draws the next."""
    displays = RankDisplays([0])
    frames = [{"data": {"text/plain": f"Epoch 0/-2 \x1b[38;5;237m━━━━━━━━━━\x1b[0m {n}/2 0:00:00 • -:--:--"}}
              for n in range(3)]
    for frame in frames:
        displays.take(0, "clear_output", {"wait": True})
        displays.take(0, "display_data", frame)
    assert displays.new_bars() == [(0, Bar("Epoch 0/-2", "2", "2"))]
    assert displays.shown(0, frames) == [frames[-1]]


def test_a_widgets_display_is_no_bar_of_its_own_its_models_move():
    """tqdm's notebook bar is displayed with the text it had when made ("0/40"): read as a bar, it
    held the live line at 0 while the widget moved (the rehearsal of this change caught it)."""
    displays = RankDisplays([0])
    progress = opened("p", _model_name="IntProgressModel", value=9, max=40, description="epoch 0")
    displays.take(0, "comm_open", progress)
    displays.take(0, "display_data", {"data": {
        "text/plain": "epoch 0:   0%|          | 0/40 [00:00<?, ?it/s]",
        "application/vnd.jupyter.widget-view+json": {"model_id": "p"}}})
    assert displays.new_bars() == [(0, Bar("epoch 0", "9", "40"))]


def test_changed_displays_are_the_ones_up_since_the_last_clear_as_they_stand_once_per_change():
    displays = RankDisplays([0, 1])
    table = {"data": {"text/html": "<progress value='0' max='6'></progress>"}, "metadata": {},
             "transient": {"display_id": "t"}}
    displays.take(0, "display_data", table)
    displays.take(1, "display_data", {"data": {"text/plain": "rank 1's"}, "metadata": {}})
    assert displays.changed_displays([0]) == {0: [table]}   # rank 1's is asked for apart
    assert displays.changed_displays([0]) == {}
    displays.take(0, "update_display_data", {"data": {"text/html": "<progress value='3' max='6'></progress>"},
                                             "metadata": {}, "transient": {"display_id": "t"}})
    [now] = displays.changed_displays([0])[0]
    assert now["data"] == {"text/html": "<progress value='3' max='6'></progress>"}
    displays.take(0, "clear_output", {"wait": False})   # cleared, then drawn again
    assert displays.changed_displays([0]) == {0: []}
    frame = {"data": {"text/plain": "frame 2"}, "metadata": {}}
    displays.take(0, "display_data", frame)
    assert displays.changed_displays([0, 1]) == {0: [frame], 1: [{"data": {"text/plain": "rank 1's"},
                                                                  "metadata": {}}]}


def test_a_clearing_that_waits_empties_nothing_until_the_next_display_comes():
    """rich's live display clears with wait=True: a frontend keeps the frame until the next one, so
    the notebook never blinks empty between two frames."""
    displays = RankDisplays([0])
    first, second = ({"data": {"text/plain": f"frame {n}"}, "metadata": {}} for n in (1, 2))
    displays.take(0, "display_data", first)
    assert displays.changed_displays([0]) == {0: [first]}
    displays.take(0, "clear_output", {"wait": True})
    assert displays.changed_displays([0]) == {}   # frame 1 stays up
    displays.take(0, "display_data", second)
    assert displays.changed_displays([0]) == {0: [second]}
    displays.take(0, "clear_output", {"wait": False})
    assert displays.changed_displays([0]) == {0: []}
    assert displays.shown(0, [first, second]) == []   # the end: all that was made then cleared
