"""The rich displays a cell's ranks make and update, kept in the kernel while the cell runs: their
progress for the cell's live area, and each display as it stands, for the notebook and the cell's
end.

- Widgets (``tqdm.auto`` picks tqdm's notebook bar on a rank; Lightning's bar is one): the rank's
  comm messages say their state (output/pure/widgets). ipyparallel's client forwards them to the
  notebook too, so a widget shown at the end is live there; its text form (what nbclient, a
  terminal, a saved notebook, a frontend without widgets show) was the state it was made with.
- Displays a rank updates in place (``display(..., display_id=True)`` then ``update``: the Hugging
  Face Trainer's progress table): the client keeps only the first state, and drops the updates.
- Displays a rank clears and draws again (``clear_output``: rich's live display, so Lightning's
  RichProgressBar): the client keeps every frame, and drops the clearing.

``shown`` gives them as they stand now, for the cell's end; ``changed_displays`` those up since a
rank's last clearing, for the notebook while the cell runs (mpirun/forwarded_displays); a
display's text or HTML that draws a bar is progress.
"""
from __future__ import annotations

import copy
import threading

from mlp_magic.output.pure.progress import bar_in_html, current_piece, parse_bar
from mlp_magic.output.pure.widgets import WIDGET_VIEW, WidgetModels

UPDATE, SHOWN, CLEARED = "update_display_data", "display_data", "clear_output"


class RankDisplays:
    """Per rank index, its widget models and its displays' latest data; fed on the client's IO
    thread (client/waiting's ``on_display``), read by the cell."""

    def __init__(self, ranks: list):
        self._ranks = list(ranks)
        self._widgets: dict = {}    # index -> WidgetModels
        self._updated: dict = {}    # index -> {display id: its latest content}
        self._drawn: dict = {}      # index -> {bar kind: the bar its latest display drew}
        self._made: dict = {}       # index -> how many displays it made
        self._cleared: dict = {}    # index -> how many of those it cleared
        self._moved: set = set()    # indices whose progress may have moved since new_bars()
        self._up: dict = {}         # index -> the displays it made since it last cleared its output
        self._changed: set = set()  # indices whose displays changed since changed_displays()
        self._clear_waits: set = set()   # indices that cleared with wait=True: cleared at the next
        self._lock = threading.Lock()

    def take(self, index: int, kind: str, content: dict) -> None:
        """One message of rank ``index``: a comm message, or a display's update."""
        with self._lock:
            if kind == CLEARED:
                self._cleared[index] = self._made.get(index, 0)
                if content.get("wait"):   # as a frontend does: cleared when the next comes, no blank between
                    self._clear_waits.add(index)
                else:
                    self._up[index] = []
                    self._changed.add(index)
            elif kind in (SHOWN, UPDATE):
                self._take_display(index, kind, content)
            elif self._widgets.setdefault(index, WidgetModels()).take(kind, content):
                self._moved.add(index)

    def _take_display(self, index: int, kind: str, content: dict) -> None:
        data = content.get("data")
        if not isinstance(data, dict):
            return
        if kind == SHOWN:
            self._made[index] = self._made.get(index, 0) + 1
            if index in self._clear_waits:
                self._clear_waits.discard(index)
                self._up[index] = []
            self._up.setdefault(index, []).append(content)
        shown = (content.get("transient") or {}).get("display_id")
        if kind == UPDATE and isinstance(shown, str):
            self._updated.setdefault(index, {})[shown] = content
        self._changed.add(index)
        if WIDGET_VIEW in data:   # its text is the widget as it was made: its models say how it moves
            return
        bar = bar_in_html(data.get("text/html"))
        if bar is None and isinstance(data.get("text/plain"), str):
            bar = parse_bar(current_piece(data["text/plain"]))
        if bar is not None:
            self._drawn.setdefault(index, {})[bar.kind] = bar
            self._moved.add(index)

    def new_bars(self) -> list:
        """[(rank, Bar)] of the ranks whose widgets or displays changed since the last call."""
        with self._lock:
            moved, self._moved = self._moved, set()
            bars = []
            for i in sorted(moved):
                widgets = self._widgets.get(i)
                bars += [(self._ranks[i], bar) for bar in (widgets.bars() if widgets else [])]
                bars += [(self._ranks[i], bar) for bar in self._drawn.get(i, {}).values()]
            return bars

    def changed_displays(self, indices) -> dict:
        """{index: its displays up now, each as it stands} of those of ``indices`` whose displays
        were made, updated or cleared since the last call."""
        with self._lock:
            changed = self._changed & set(indices)
            self._changed -= changed
            return {i: [_as_it_stands(output, self._widgets.get(i), self._updated.get(i, {}))
                        for output in self._up.get(i, [])] for i in sorted(changed)}

    def shown(self, index: int, displays: list) -> list:
        """``displays`` of rank ``index`` (all it made, in order), each as it stands now, those it
        cleared left out."""
        with self._lock:
            widgets, updated = self._widgets.get(index), self._updated.get(index, {})
            kept = displays[self._cleared.get(index, 0):]
            return [_as_it_stands(output, widgets, updated) for output in kept]


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
