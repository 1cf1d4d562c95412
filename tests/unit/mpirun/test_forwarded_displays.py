"""The shown ranks' displays in the notebook, slot by slot (mpirun/forwarded_displays)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from mlp_magic.mpirun import forwarded_displays
from mlp_magic.mpirun.forwarded_displays import ForwardedDisplays
from mlp_magic.mpirun.rank_displays import RankDisplays


class Notebook:
    """What the kernel sent: displays made and updated, by display id."""

    def __init__(self):
        self.outputs: list = []

    def display(self, data, raw, metadata, display_id):
        handle = SimpleNamespace(slot=len(self.outputs), update=self._updater(len(self.outputs)))
        self.outputs.append(data)
        return handle

    def _updater(self, slot):
        def update(data, raw, metadata):
            self.outputs[slot] = data
        return update


class Area:
    def __init__(self, notebook: bool):
        self.notebook, self.shown = notebook, 0

    def show_area(self):
        self.shown += 1


@pytest.fixture
def notebook(monkeypatch):
    shown = Notebook()
    monkeypatch.setattr(forwarded_displays, "display", shown.display)
    return shown


def made(text: str) -> dict:
    return {"data": {"text/plain": text}, "metadata": {}}


def test_the_lowest_ranks_displays_show_as_they_come_then_end_as_they_stand_once(notebook):
    displays, area = RankDisplays([2, 3]), Area(notebook=True)
    forwarded = ForwardedDisplays([2, 3], all_ranks=False)
    displays.take(0, "display_data", {**made("step 0"), "transient": {"display_id": "t"}})
    displays.take(1, "display_data", made("rank 3's"))
    forwarded.forward(displays, area)
    assert notebook.outputs == [{"text/plain": "[rank 2] step 0"}] and area.shown == 1
    displays.take(0, "update_display_data", {**made("step 4"), "transient": {"display_id": "t"}})
    forwarded.forward(displays, area)
    assert notebook.outputs == [{"text/plain": "[rank 2] step 4"}]
    end = [SimpleNamespace(rank=2, displays=[made("step 6"), made("42")]),
           SimpleNamespace(rank=3, displays=[made("rank 3's")])]
    forwarded.finish(end)   # its slot updated, its last value below it, rank 3's not shown
    assert notebook.outputs == [{"text/plain": "[rank 2] step 6"}, {"text/plain": "[rank 2] 42"}]


def test_in_a_terminal_nothing_shows_until_the_end(notebook):
    displays, area = RankDisplays([0]), Area(notebook=False)
    forwarded = ForwardedDisplays([0], all_ranks=False)
    displays.take(0, "display_data", made("a table"))
    forwarded.forward(displays, area)
    assert notebook.outputs == [] and area.shown == 0
    forwarded.finish([SimpleNamespace(rank=0, displays=[made("a table")])])
    assert notebook.outputs == [{"text/plain": "a table"}]   # one rank: no label
