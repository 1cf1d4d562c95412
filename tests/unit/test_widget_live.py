"""The live %mlp_cluster widget: the rank lines (pure), what a change sends, and the view's thread."""
from __future__ import annotations

import json
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.cluster.pure.rank_lines import (all_stopped, by_host, changed_hosts, chunked, host_line,
                                               host_line_html, ranks_text)
from mlp_magic.cluster.text import view_text
from mlp_magic.cluster.widget import ClusterView
from mlp_magic.cluster.widget_live import CHUNKS
from tests.unit.cluster.states import two_host_state

STATES = st.sampled_from(["busy", "idle", "paused", "dead", "starting"])
ENVELOPE_BYTES = 1000   # a comm_msg's header, parent header, signature on iopub (measured: ~700)


def reading(states, per_host=8):
    return tuple((rank, "node%02d" % (rank // per_host), state) for rank, state in enumerate(states))


@given(st.lists(STATES, max_size=64), st.lists(STATES, max_size=64))
def test_only_the_hosts_whose_ranks_changed_are_named(old_states, new_states):
    old, new = by_host(reading(old_states)), by_host(reading(new_states))
    changed = changed_hosts(old, new)
    assert set(changed) == {h for h in new if old.get(h) != new[h]}
    assert changed_hosts(new, new) == []


@given(st.lists(STATES, min_size=1, max_size=64))
def test_a_host_line_names_every_rank_once_in_its_state(states):
    rows = reading(states, per_host=64)
    (host, ranks), = by_host(rows).items()
    line = host_line(host, ranks)
    for state in set(states):
        assert " %d %s " % (states.count(state), state) in " " + line.split(": ", 1)[1].replace(",", " ,")
    assert "<" not in host_line_html("<x>", ranks).split("</b>", 1)[0].replace("<b>", "").split(
        'monospace">', 1)[1]


@given(st.lists(st.text(min_size=1, max_size=3), unique=True, max_size=100), st.integers(1, 12))
def test_chunks_keep_every_host_in_order(hosts, chunks):
    parts = chunked(hosts, chunks)
    assert [h for part in parts for h in part] == hosts
    assert len(parts) <= chunks and all(parts)


def test_the_text_face_ends_with_the_dashboard_line():
    rows = reading(["busy", "busy", "idle", "idle"], per_host=2)
    text = view_text(two_host_state(), rows, "dashboard: http://x/mlp-magic/dashboard")
    assert ranks_text(rows) == ["ranks (live):", "  node00: 2 busy 0-1", "  node01: 2 idle 2-3"]
    assert "  node00: 2 busy 0-1\n" in text
    assert text.endswith("\ndashboard: http://x/mlp-magic/dashboard\n")
    assert all_stopped(rows)[0] == (0, "node00", "dead")


class FakeLive:
    def __init__(self, rows):
        self.rows = list(rows)

    def record(self):
        return {"ranks": [{"rank": r, "host": h, "state": s} for r, h, s in self.rows]}


class FakeWorld:
    """What the view reads of a World: its live record, whether it started and still runs."""

    def __init__(self, rows):
        self.live, self.started_at, self.client = FakeLive(rows), 1.0, object()

    def lifeline_ended(self):
        return False


def sent_bytes(monkeypatch):
    """Every widget message's bytes (its JSON plus ``ENVELOPE_BYTES``), where ipywidgets hands a
    state update to its comm (``Widget._send``). Outside a kernel a widget sends no update (its
    ``notify_change`` asks its comm for a kernel first, in 8.0, and in 8.1 once ipykernel made
    the comms): here every change is sent as if a kernel were there."""
    from ipywidgets import Widget

    sent = []

    def recording(self, msg, buffers=None):
        sent.append(len(json.dumps({"data": msg}, default=str)) + ENVELOPE_BYTES)

    def notify_change(self, change):
        name = change["name"]
        wanted = self.comm is not None and name in self.keys
        if wanted and self._should_send_property(name, getattr(self, name)):
            self.send_state(key=name)
        super(Widget, self).notify_change(change)

    monkeypatch.setattr(Widget, "_send", recording)
    monkeypatch.setattr(Widget, "notify_change", notify_change)
    return sent


@pytest.mark.parametrize("ranks, per_host", [(4, 4), (512, 8)])
def test_a_second_of_changes_sends_under_50_kb(monkeypatch, ranks, per_host):
    sent = sent_bytes(monkeypatch)
    world = FakeWorld(reading(["idle"] * ranks, per_host))
    view = ClusterView(lambda: two_host_state(), world_of=lambda: world)
    view.widget
    per_second = []
    for second in range(6):   # the worst: every rank flips, even and odd apart (folds badly)
        states = ["busy" if (rank + second) % 2 else "idle" for rank in range(ranks)]
        sent.clear()
        view.show_ranks(reading(states, per_host))
        per_second.append(sum(sent))
    assert 0 < max(per_second) < 50_000 and len(sent) <= CHUNKS
    sent.clear()
    view.show_ranks(reading(states, per_host))   # nothing changed: nothing sent
    assert sent == []
    one = list(states)
    one[ranks - 1] = "paused"
    view.show_ranks(reading(one, per_host))   # one rank: one chunk
    assert len(sent) == 1
    print("%d ranks: at most %d bytes/s, one rank's change %d bytes" % (ranks, max(per_second), sent[0]))
    view.close()


def live_threads():
    return [t for t in threading.enumerate() if t.name.startswith("mlp-cluster-live-")]


def wait_for(check, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.02)
    return check()


def test_the_thread_follows_the_world_and_ends_when_it_stops():
    world = FakeWorld(reading(["idle"] * 4, per_host=2))
    view = ClusterView(lambda: two_host_state(), world_of=lambda: world)
    view.widget
    view.start_auto_refresh(0.05)
    assert len(live_threads()) == 1 and view.live.thread.daemon
    world.live.rows = list(reading(["busy"] * 4, per_host=2))
    lines = view.widget.children[1]
    assert wait_for(lambda: "<b>2 busy</b> 0-1" in lines.children[0].value)
    assert "node00: 2 busy 0-1" in repr(view)
    world.client = None   # the World stopped: its ranks are drawn dead and the thread ends
    assert wait_for(lambda: not live_threads())
    assert "<b>2 dead</b> 0-1" in lines.children[0].value and view.live is None
    assert view.widget.children[0].children[2].value is False   # the Live toggle says so
    view.close()


def test_closing_the_view_ends_its_thread_and_a_slow_collect_never_asks_twice_at_once():
    calls = []

    def collect():
        calls.append(threading.current_thread().name)
        return two_host_state()

    view = ClusterView(collect, world_of=lambda: None)
    view.start_auto_refresh(0.05)
    assert wait_for(lambda: len(calls) >= 3)
    assert calls[0] == "MainThread" and calls[-1].startswith("mlp-cluster-live-")
    view.close()
    assert not live_threads()


def test_the_threads_collector_never_asks_the_worlds_engines(monkeypatch):
    from mlp_magic.cluster.collect import CollectOptions, StateCollector
    from mlp_magic.gpu import engines

    def asked(*args, **kwargs):
        raise AssertionError("the engines may be running the user's cell")

    monkeypatch.setattr(engines, "collect_from_world", asked)
    world = FakeWorld(reading(["busy"] * 2))
    collector = StateCollector(CollectOptions(gpus="all"), world=world)
    threads = collector.for_thread()
    assert threads.world is world and threads.options.published_gpus
    assert threads._engine_inventories(world, None, frozenset()) == []
    assert not StateCollector(CollectOptions(gpus="none")).for_thread().options.published_gpus


def test_a_dropped_view_ends_its_thread():
    import gc

    view = ClusterView(lambda: two_host_state(), world_of=lambda: None)
    view.start_auto_refresh(0.05)
    thread = view.live.thread
    del view
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()


def test_a_failing_tick_is_kept_and_the_thread_goes_on():
    calls = []

    def world_of():
        calls.append(1)
        if len(calls) > 2:   # the first calls are the view's and the thread's own, in the kernel's thread
            raise OSError("keep file unreadable")

    view = ClusterView(lambda: two_host_state(), world_of=world_of)
    view.start_auto_refresh(0.05)
    assert wait_for(lambda: len(calls) >= 5)
    assert view.last_error == "OSError: keep file unreadable" and view.live.running
    view.close()
    assert not live_threads()
