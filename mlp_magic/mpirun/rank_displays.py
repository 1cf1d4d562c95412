"""The rich displays a cell's ranks make and update, kept in the kernel while the cell runs: their
progress for the cell's live area, and each display as it stands for the cell's end.

- Widgets (``tqdm.auto`` picks tqdm's notebook bar on a rank; Lightning's bar is one): the rank's
  comm messages say their state (output/pure/widgets). ipyparallel's client forwards them to the
  notebook too, so a widget shown at the end is live there; its text form (what nbclient, a
  terminal, a saved notebook, a frontend without widgets show) was the state it was made with.
- Displays a rank updates in place (``display(..., display_id=True)`` then ``update``: the Hugging
  Face Trainer's progress table): the client keeps only the first state, and drops the updates.

``shown`` gives both their state now.
"""
from __future__ import annotations

import copy
import threading

from mlp_magic.output.pure.progress import bar_in_html
from mlp_magic.output.pure.widgets import WIDGET_VIEW, WidgetModels

UPDATE = "update_display_data"


class RankDisplays:
    """Per rank index, its widget models and its displays' latest data; fed on the client's IO
    thread (client/waiting's ``on_display``), read by the cell."""

    def __init__(self, ranks: list):
        self._ranks = list(ranks)
        self._widgets: dict = {}    # index -> WidgetModels
        self._updated: dict = {}    # index -> {display id: its latest content}
        self._moved: set = set()    # indices whose progress may have moved since new_bars()
        self._lock = threading.Lock()

    def take(self, index: int, kind: str, content: dict) -> None:
        """One message of rank ``index``: a comm message, or a display's update."""
        with self._lock:
            if kind == UPDATE:
                shown = (content.get("transient") or {}).get("display_id")
                if isinstance(shown, str) and isinstance(content.get("data"), dict):
                    self._updated.setdefault(index, {})[shown] = content
                    self._moved.add(index)
            elif self._widgets.setdefault(index, WidgetModels()).take(kind, content):
                self._moved.add(index)

    def new_bars(self) -> list:
        """[(rank, Bar)] of the ranks whose widgets or displays changed since the last call."""
        with self._lock:
            moved, self._moved = self._moved, set()
            bars = []
            for i in sorted(moved):
                widgets = self._widgets.get(i)
                bars += [(self._ranks[i], bar) for bar in (widgets.bars() if widgets else [])]
                for content in self._updated.get(i, {}).values():
                    bar = bar_in_html(content["data"].get("text/html"))
                    if bar is not None:
                        bars.append((self._ranks[i], bar))
            return bars

    def shown(self, index: int, displays: list) -> list:
        """``displays`` of rank ``index``, each as it stands now."""
        with self._lock:
            widgets, updated = self._widgets.get(index), self._updated.get(index, {})
            return [_as_it_stands(output, widgets, updated) for output in displays]


def _as_it_stands(output: dict, widgets: WidgetModels | None, updated: dict) -> dict:
    latest = updated.get((output.get("transient") or {}).get("display_id"))
    if latest is not None:
        output = dict(output, data=latest["data"], metadata=latest.get("metadata") or {})
    view = (output.get("data") or {}).get(WIDGET_VIEW)
    text = widgets.text(view.get("model_id")) if widgets and isinstance(view, dict) else None
    if text is None:
        return output
    output = copy.deepcopy(output)
    output["data"]["text/plain"] = text
    return output
