"""The rich displays of a cell's shown ranks (the lowest; every rank with ``--all-outputs``) in the
notebook while the cell runs, and as they stand when it ends (kernel side).

A display a rank makes is shown under the cell's area as it comes; a rank's update of it in place
(the Hugging Face Trainer's table) updates it there; a rank that clears its output and draws
again (rich's live display) redraws the same slots (output/pure/display_slots). In a terminal
nothing is shown while the cell runs: each display would be printed again at every update.
"""
from __future__ import annotations

from IPython.display import display

from mlp_magic.output.pure.display_slots import labelled, slot_changes


class ForwardedDisplays:
    """The notebook's slots for each shown rank's displays, for the whole of one cell."""

    def __init__(self, ranks: list, all_ranks: bool):
        self._ranks = list(ranks)
        self._several = len(self._ranks) > 1
        lowest = min(self._ranks, default=None)
        self._indices = [i for i, rank in enumerate(self._ranks) if all_ranks or rank == lowest]
        self._handles: dict = {}   # rank -> [DisplayHandle], one per slot
        self._shown: dict = {}     # rank -> [what each slot shows]

    def forward(self, rank_displays, live) -> None:
        """While the cell runs: what the shown ranks' displays changed, into the notebook, below
        the cell's streaming area (``live``, made first if it is not yet)."""
        if not live.notebook:
            return
        for index, outputs in rank_displays.changed_displays(self._indices).items():
            if outputs or self._shown.get(self._ranks[index]):
                live.show_area()
                self._show(self._ranks[index], outputs)

    def finish(self, results: list) -> None:
        """When the cell ends: each shown rank's displays (and its last value) as they stand, in
        the slots shown while it ran, then below them."""
        shown = {self._ranks[i] for i in self._indices}
        for result in results:
            if result.rank in shown:
                self._show(result.rank, result.displays)

    def _show(self, rank: int, outputs: list) -> None:
        current = [{"data": labelled(output["data"], rank, self._several),
                    "metadata": output.get("metadata") or {}}
                   for output in outputs if output.get("data")]
        handles, shown = self._handles.setdefault(rank, []), self._shown.setdefault(rank, [])
        for slot, bundle in slot_changes(shown, current):
            if slot < len(handles):
                handles[slot].update(bundle["data"], raw=True, metadata=bundle["metadata"])
                shown[slot] = bundle
            else:
                handles.append(display(bundle["data"], raw=True, metadata=bundle["metadata"],
                                       display_id=True))
                shown.append(bundle)
