"""A rank's displays mirrored slot by slot (output/pure/display_slots)."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.output.pure.display_slots import EMPTY, labelled, slot_changes


def shown_as(text: str) -> dict:
    return {"data": {"text/plain": text}, "metadata": {}}


def test_a_new_display_fills_the_next_slot_and_an_update_its_own():
    a, b, b2 = shown_as("a"), shown_as("b"), shown_as("b, updated")
    assert slot_changes([], [a]) == [(0, a)]
    assert slot_changes([a], [a, b]) == [(1, b)]
    assert slot_changes([a, b], [a, b2]) == [(1, b2)]
    assert slot_changes([a, b2], [a, b2]) == []


def test_after_a_clear_the_frames_redraw_the_first_slots_and_the_rest_are_emptied_once():
    frame1, frame2 = shown_as("frame 1"), shown_as("frame 2")
    assert slot_changes([frame1, shown_as("x")], [frame2]) == [(0, frame2), (1, EMPTY)]
    assert slot_changes([frame2, EMPTY], [frame2]) == []


@given(st.lists(st.sampled_from("abc"), max_size=6), st.lists(st.sampled_from("abc"), max_size=6))
def test_the_changes_make_the_slots_show_the_displays_then_nothing(before, after):
    shown = [shown_as(t) for t in before]
    for slot, bundle in slot_changes(shown, [shown_as(t) for t in after]):
        assert slot <= len(shown)   # a new slot comes right after the last
        shown[slot:slot + 1] = [bundle]
    assert shown[:len(after)] == [shown_as(t) for t in after]
    assert all(bundle == EMPTY for bundle in shown[len(after):])


def test_a_displays_text_names_its_rank_where_the_cell_ran_on_several():
    assert labelled({"text/plain": "x", "text/html": "<b>x</b>"}, 3, True) == {
        "text/plain": "[rank 3] x", "text/html": "<b>x</b>"}
    assert labelled({"text/plain": "x"}, 0, False) == {"text/plain": "x"}
    assert labelled({"image/png": "..."}, 2, True) == {"image/png": "..."}
