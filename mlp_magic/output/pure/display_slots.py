"""A rank's displays mirrored in the notebook, slot by slot (pure).

The notebook shows a rank's displays in slots, one per display the rank has up now, in order:
a display the rank makes fills the next slot, one it updates in place updates its slot, and
after the rank clears its output (rich's live display draws each frame so) its next displays
fill the slots from the first again. A notebook cannot take one output back, so a slot past the
rank's displays is emptied.
"""
from __future__ import annotations

EMPTY = {"data": {"text/plain": ""}, "metadata": {}}


def slot_changes(shown: list, current: list) -> list:
    """``shown``: what each slot shows now; ``current``: the rank's displays now, in order (each
    ``{"data": ..., "metadata": ...}``). -> [(slot, display)] that make the slots show
    ``current``: a slot below ``len(shown)`` is updated, one at or past it is made, in order."""
    changes = [(slot, data) for slot, data in enumerate(current)
               if slot >= len(shown) or shown[slot] != data]
    changes += [(slot, EMPTY) for slot in range(len(current), len(shown)) if shown[slot] != EMPTY]
    return changes


def labelled(data: dict, rank: int, several: bool) -> dict:
    """A display's data as the notebook shows it: whose it is, in its text, where the cell ran on
    several ranks."""
    if several and isinstance(data.get("text/plain"), str):
        return {**data, "text/plain": f"[rank {rank}] {data['text/plain']}"}
    return dict(data)
