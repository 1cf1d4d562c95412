"""A rank's widgets read from their comm messages (output/pure/widgets): the messages are those
tqdm's own notebook bar and ipywidgets send (recorded here in place of a kernel's comm)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.output.pure.progress import Bar
from mlp_magic.output.pure.widgets import WidgetModels


@pytest.fixture
def sent(monkeypatch) -> list:
    """Every comm message widgets made here send, as (kind, content) like a kernel's iopub has them:
    their comm publishes nothing, it records (ipywidgets 8.0 makes ipykernel's Comm, 8.1 asks
    ``ipywidgets.comm.create_comm``; both send only through a comm with a kernel)."""
    from ipykernel.comm import Comm
    from ipywidgets.widgets import widget as widget_module
    from traitlets import Any

    messages = []

    class RecordedComm(Comm):
        kernel = Any()

        def __init__(self, **kwargs):
            super().__init__(kernel=object(), **kwargs)

        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            messages.append((msg_type, {"comm_id": self.comm_id, "data": data or {}, **keys}))

    if hasattr(widget_module, "Comm"):   # ipywidgets 8.0
        monkeypatch.setattr(widget_module, "Comm", RecordedComm)
    else:
        import ipywidgets.comm

        monkeypatch.setattr(ipywidgets.comm, "create_comm", RecordedComm)
    return messages


def models_from(messages: list) -> WidgetModels:
    models = WidgetModels()
    for kind, content in messages:
        models.take(kind, content)
    return models


def test_tqdms_notebook_bar_is_read_with_its_description_and_counts_as_it_moves(sent, capsys):
    from tqdm.notebook import tqdm

    bar = tqdm(total=50, desc="epoch 0", mininterval=0)
    bar.update(22)
    assert models_from(sent).bars() == [Bar("epoch 0", "22", "50")]
    bar.update(28)
    bar.close()
    models = models_from(sent)
    assert models.bars() == [Bar("epoch 0", "50", "50")]
    box, = [model for model, state in models.states.items() if state["_model_name"] == "HBoxModel"]
    assert models.text(box).startswith("epoch 0: 100% [##########] 50/50 [")


def test_a_bar_without_a_total_is_read_with_its_count(sent, capsys):
    from tqdm.notebook import tqdm

    bar = tqdm(desc="tokens", mininterval=0)
    bar.update(7)
    assert models_from(sent).bars() == [Bar("tokens", "7", None)]


def test_a_plain_progress_widget_is_a_bar_with_its_own_description(sent):
    import ipywidgets

    widget = ipywidgets.IntProgress(value=3, max=8, description="shards")
    widget.value = 5
    assert models_from(sent).bars() == [Bar("shards", "5", "8")]
    widget.close()
    assert models_from(sent).bars() == []


@given(st.lists(st.tuples(st.sampled_from(["comm_open", "comm_msg", "comm_close", "stream"]),
                          st.dictionaries(st.sampled_from(["comm_id", "data", "target_name"]),
                                          st.one_of(st.none(), st.text(max_size=3), st.integers(),
                                                    st.dictionaries(st.text(max_size=6), st.integers())))),
                max_size=20))
def test_any_message_is_taken_or_left_and_never_an_error(messages):
    models = models_from(messages)
    assert all(isinstance(bar, Bar) for bar in models.bars())
    assert all(models.text(model) is None or isinstance(models.text(model), str) for model in models.states)


def test_a_progress_neither_in_a_box_nor_described_is_no_bar_yet():
    models = WidgetModels()
    models.take("comm_open", {"comm_id": "p", "target_name": "jupyter.widget",
                              "data": {"state": {"_model_name": "FloatProgressModel", "value": 0, "max": 9}}})
    assert models.bars() == []   # tqdm makes its progress first, then the box that describes it
    models.take("comm_open", {"comm_id": "h", "target_name": "jupyter.widget",
                              "data": {"state": {"_model_name": "HTMLModel", "value": "fit:   0%"}}})
    box = {"_model_name": "HBoxModel", "children": ["IPY_MODEL_h", "IPY_MODEL_p"]}
    models.take("comm_open", {"comm_id": "b", "target_name": "jupyter.widget", "data": {"state": box}})
    assert models.bars() == [Bar("fit", "0", "9")]
