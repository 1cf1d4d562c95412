"""The live ``%mlp_cluster`` widget: a kernel thread that updates it while other cells run.

ipykernel runs cells on its event loop, so a task on that loop waits for the running cell; a
thread does not. ``LiveRefresh`` is one daemon thread per view (``mlp-cluster-live-<id>``):
- every ``FAST_EVERY_S`` it reads the ranks' states from the kernel's World, in memory (the
  ``world/live.LiveWorld`` the rank-waiting loop keeps: nothing goes over the network) and
  redraws the rank lines of the hosts whose ranks changed (``RankLines``);
- every ``slow_every`` seconds it collects the slow part (topology, reachability, GPUs) itself,
  never asking the World's engines (they may be running the user's cell: the view's collector
  made for the thread shows the GPUs the World published instead), and redraws what changed;
- it ends when the view is closed (``stop``) or dropped (it holds the view weakly), or when the
  World it showed stops: its ranks are drawn dead, once.
A trait set from this thread is sent by ipywidgets through the kernel's iopub socket, which
ipykernel makes safe to use from any thread (its IOPubThread queues the message to its own loop).
The rank lines are split in at most ``CHUNKS`` HTML widgets, so a change re-sends one chunk's
line(s), a tick without change sends nothing, and 512 ranks that all change cost ``CHUNKS`` messages.
"""
from __future__ import annotations

import threading
import time
import weakref
from typing import Any
from collections.abc import Callable, Sequence

from mlp_magic.cluster.pure.rank_lines import (HostRanks, RankRow, all_stopped, by_host, changed_hosts,
                                               chunked, host_line_html)

FAST_EVERY_S = 1.0     # the ranks' states
CHUNKS = 8             # rank-line widgets at most: one message per changed chunk
JOIN_S = 2.0


def world_stopped(world: Any) -> bool:
    """A World that was started and is gone now (stopped, or its controller lost)."""
    return world.started_at is not None and (world.client is None or world.lifeline_ended())


def rank_rows(world: Any) -> tuple:
    """The World's ranks as ``(rank, host, state)``, read from its live record (no network)."""
    if world is None:
        return ()
    rows = tuple((row["rank"], row["host"], row["state"]) for row in world.live.record()["ranks"])
    return all_stopped(rows) if world_stopped(world) else rows


class RankLines:
    """The ranks' lines of one view: a VBox of at most ``CHUNKS`` HTML widgets."""

    def __init__(self) -> None:
        import ipywidgets as w

        self.box = w.VBox()
        self.box.add_class("mlp-cluster-ranks")
        self.shown: dict[str, HostRanks] = {}
        self._html: dict[str, str] = {}
        self._chunks: list[Any] = []
        self._hosts: list[list[str]] = []

    def show(self, rows: Sequence[RankRow]) -> None:
        """Redraw the chunks that hold a changed host (only those values are sent)."""
        grouped = by_host(rows)
        changed = set(changed_hosts(self.shown, grouped))
        for host in changed:
            self._html[host] = host_line_html(host, grouped[host])
        hosts = chunked(list(grouped), CHUNKS)
        if hosts != self._hosts:
            self._rebuild(hosts)
        else:
            for widget, names in zip(self._chunks, hosts):
                if changed.intersection(names):
                    widget.value = self._chunk_html(names)
        self.shown = grouped

    def _chunk_html(self, names: Sequence[str]) -> str:
        return "".join(self._html[h] for h in names)

    def _rebuild(self, hosts: list[list[str]]) -> None:
        """Other hosts (a new World): new chunk widgets, each opened with its lines."""
        import ipywidgets as w

        for old in self._chunks:
            old.close()
        self._chunks = [w.HTML(self._chunk_html(names)) for names in hosts]
        self.box.children = tuple(self._chunks)
        self._hosts = hosts

    def close(self) -> None:
        for widget in self._chunks:
            widget.close()
        self.box.close()


class LiveRefresh:
    """One view's kernel thread (see the module's docstring); ``stop()`` ends it."""

    def __init__(self, view: Any, world_of: Callable[[], Any], slow_every: float,
                 fast_every: float = FAST_EVERY_S):
        self._view, self.world_of = weakref.ref(view), world_of   # a view dropped ends its thread
        self.slow_every, self.fast_every = float(slow_every), float(fast_every)
        self._stopped = threading.Event()
        self._shown = None   # the World shown: when the owner lets it go, it is shown stopped
        try:
            self._shown = world_of()
        except Exception:  # noqa: BLE001 - the thread's first tick says why (last_error)
            pass
        self.thread = threading.Thread(target=self._run, name="mlp-cluster-live-%x" % id(view), daemon=True)

    def start(self) -> LiveRefresh:
        self.thread.start()
        return self

    def stop(self, wait: bool = True) -> None:
        self._stopped.set()
        if wait and self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(JOIN_S)

    @property
    def running(self) -> bool:
        return self.thread.is_alive() and not self._stopped.is_set()

    def _run(self) -> None:
        self._next_slow = time.monotonic() + self.slow_every
        while not self._stopped.wait(self.fast_every):
            view = self._view()
            if view is None or not self._tick_quietly(view):
                break
            del view   # held only for the tick
        self._stopped.set()
        view = self._view()
        if view is not None:
            view.live_ended(self)

    def _tick_quietly(self, view: Any) -> bool:
        """One tick; False once the World stopped. A failure is kept in the view's ``last_error``
        (a thread has no caller to raise to, and a traceback would land in whichever cell runs)."""
        try:
            return self._tick(view)
        except Exception as exc:  # noqa: BLE001
            view.last_error = "%s: %s" % (type(exc).__name__, exc)
            return True

    def _tick(self, view: Any) -> bool:
        world = self._shown = self.world_of() or self._shown
        view.show_ranks(self._rows(view, world))
        if world is not None and world_stopped(world):
            return False   # the World stopped: its ranks are drawn dead, nothing more will change
        if time.monotonic() >= self._next_slow and not self._stopped.is_set():
            view.slow_tick(world)
            self._next_slow = time.monotonic() + self.slow_every
        return True

    @staticmethod
    def _rows(view: Any, world: Any) -> tuple:
        try:
            return rank_rows(world)
        except Exception:  # noqa: BLE001 - a World half torn down: show what was shown
            return tuple(view.shown_rows)


def start_live(view: Any, world_of: Callable[[], Any], slow_every: float,
               fast_every: float | None = None) -> LiveRefresh:
    return LiveRefresh(view, world_of, slow_every, fast_every or FAST_EVERY_S).start()
