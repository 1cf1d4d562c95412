"""The widgets a rank made, as its comm messages tell their state, read as progress and text (pure).

A widget made on a rank (``tqdm.auto`` picks tqdm's notebook bar on the ranks, Lightning's
progress bar is one) is a set of models on the rank; the rank's comm messages say their state
(``comm_open``) and its changes (``comm_msg`` "update"). The kernel keeps them per rank
(``WidgetModels``), reads each progress model as a ``Bar`` (tqdm's: an HBox of an HTML with the
description and percentage, the progress, an HTML with "n/total [times]"), and a widget's text as
it stands now, for its display when the cell ends.
"""
from __future__ import annotations

import re

from mlp_magic.output.pure.progress import Bar, drawn_bar, plain_text

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PROGRESS_MODELS = frozenset({"FloatProgressModel", "IntProgressModel"})
TEXT_MODELS = frozenset({"HTMLModel", "LabelModel", "TextModel", "HTMLMathModel"})
_PERCENT = re.compile(r"\s*\d{1,3}%$")
_COUNTS = re.compile(r"^\s*(\d+(?:\.\d+)?[kMGTPEZY]?)(?:/(\d+(?:\.\d+)?[kMGTPEZY]?))?")
_REFERENCE = "IPY_MODEL_"


class WidgetModels:
    """One rank's widget models: {model id: state}, from its comm messages."""

    def __init__(self):
        self.states: dict = {}

    def take(self, kind: str, content: dict) -> bool:
        """Apply one comm message (``kind``: comm_open, comm_msg, comm_close); whether it changed
        a widget's state."""
        model, data = content.get("comm_id"), content.get("data") or {}
        if not isinstance(model, str) or not isinstance(data, dict):
            return False
        state = data.get("state")
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget" and isinstance(state, dict):
            self.states[model] = dict(state)
        elif kind == "comm_msg" and data.get("method") == "update" and isinstance(state, dict) \
                and model in self.states:
            self.states[model].update(state)
        elif kind == "comm_close" and model in self.states:
            del self.states[model]
        else:
            return False
        return True

    def bars(self) -> list:
        """A ``Bar`` for each progress model, described by the box it sits in, or by itself."""
        boxes = {child: state for state in self.states.values() for child in _children(state)}
        # a progress neither in a box nor described says nothing yet (tqdm's, before its box comes)
        return [self._bar(model, state, boxes.get(model)) for model, state in self.states.items()
                if state.get("_model_name") in PROGRESS_MODELS
                and (model in boxes or state.get("description"))]

    def text(self, model: str, depth: int = 0) -> str | None:
        """What the widget ``model`` shows, as text (a box: its children's; a progress: its count);
        None for a widget this cannot tell."""
        state = self.states.get(model)
        if state is None or depth > 8:
            return None
        name = state.get("_model_name")
        if name in TEXT_MODELS:
            return plain_text(state.get("value"))
        if name in PROGRESS_MODELS:
            return drawn_bar(_float(state.get("value")), _float(state.get("max"))) or None
        parts = [self.text(child, depth + 1) for child in _children(state)]
        shown = " ".join(part for part in parts if part)
        return shown or None

    def _bar(self, model: str, state: dict, box: dict | None) -> Bar:
        siblings = _children(box) if box else []
        at = siblings.index(model) if model in siblings else 0
        before = " ".join(filter(None, (self.text(m) for m in siblings[:at])))
        after = " ".join(filter(None, (self.text(m) for m in siblings[at + 1:])))
        desc = _PERCENT.sub("", before).strip().rstrip(":").strip() or plain_text(state.get("description"))
        counts = _COUNTS.match(after)
        if counts and counts.group(2):
            return Bar(desc, counts.group(1), counts.group(2))
        if counts and state.get("bar_style") == "info":   # tqdm's bar without a total
            return Bar(desc, counts.group(1), None)
        return Bar(desc, _number(state.get("value")), _number(state.get("max")))


def _children(state: dict) -> list:
    children = state.get("children")
    if not isinstance(children, list):
        return []
    return [child[len(_REFERENCE):] for child in children
            if isinstance(child, str) and child.startswith(_REFERENCE)]


def _float(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _number(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "0"
    return f"{value:g}" if isinstance(value, float) and not value.is_integer() else str(int(value))
