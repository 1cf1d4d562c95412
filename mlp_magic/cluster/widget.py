"""``%mlp_cluster``: the cluster as an ipywidgets view (HTML, GridBox, Tab, progress bars; no
custom JS), live by default: a kernel thread (``widget_live``) updates it while other cells run.

``ClusterView`` holds one ClusterState (``model.py``) and draws it; the collecting is
``collect.StateCollector``'s, the text and HTML reprs are ``text.py``'s and ``html.py``'s.
ipywidgets is imported only when a widget is built, so a ClusterView in a terminal costs nothing.
"""
from __future__ import annotations

import html
import threading
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Mapping

from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu import HostGpus
from mlp_magic.cluster.collect import CollectOptions, StateCollector, load_inventories
from mlp_magic.cluster.html import (host_html, legend_html, link_cell_html, memory_bar, nic_affinity_rows,
                                    state_html, table_html, util_bar)
from mlp_magic.cluster.pure.model import ClusterState, HostView
from mlp_magic.cluster.text import host_rows, title, view_text
from mlp_magic.cluster.widget_live import FAST_EVERY_S, LiveRefresh, RankLines, rank_rows, start_live
from mlp_magic.world.owner import kernel_world

SLOW_EVERY_S = 5.0   # the live view's slow part (topology, reachability, GPUs); --refresh S


class ClusterView:
    """The cluster as a widget; ``state`` holds everything shown, the widgets hold no logic.

    ``refresh()`` (or the Refresh button) collects a new state; ``start_auto_refresh(seconds)``
    starts the view's live thread (``widget_live.LiveRefresh``): the ranks' states every second,
    the rest every ``seconds``, while other cells run. ``repr()`` is plain text ending with the
    dashboard's URL, ``_repr_html_()`` static HTML.
    """

    def __init__(self, collect: Callable[[], ClusterState], state: ClusterState | None = None,
                 world_of: Callable[[], Any] | None = None):
        self._collect = collect
        self._collect_in_thread = collect.for_thread() if hasattr(collect, "for_thread") else collect
        self._world_of = world_of or (lambda: None)
        self.state = state if state is not None else collect()
        self.shown_rows: tuple = self._read_rows()
        self.refresh_count = 0
        self.last_error: str | None = None
        self.auto_refresh_seconds: float | None = None
        self._live: LiveRefresh | None = None
        self._drawing = threading.RLock()   # the kernel's thread and the live thread draw in turn
        self._widgets: dict[str, Any] = {}
        # The text face's last line: where the dashboard is (set by the magic: panel/locate).
        self.where_dashboard: Callable[[], str] | None = None

    def _read_rows(self) -> tuple:
        try:
            return rank_rows(self._world_of())
        except Exception:  # noqa: BLE001 - a World half torn down shows no ranks
            return ()

    # -- refreshing
    def refresh(self) -> ClusterState:
        """Collect now and redraw; returns the new state."""
        self._show(self._collect())
        self.show_ranks(self._read_rows())
        return self.state

    def _show(self, state: ClusterState) -> None:
        with self._drawing:
            self.state = state
            self.refresh_count += 1
            if self._widgets:
                self._redraw()

    def show_ranks(self, rows: tuple) -> None:
        """The ranks' states (``(rank, host, state)`` rows): only the changed lines are sent."""
        with self._drawing:
            self.shown_rows = tuple(rows)
            if self._widgets:
                self._widgets["ranks"].show(self.shown_rows)

    def slow_tick(self, world: Any) -> None:
        """The live thread's collect of the slow part (never through the World's engines)."""
        if hasattr(self._collect_in_thread, "world") and world is not None:
            self._collect_in_thread.world = world
        state = self._collect_quietly(self._collect_in_thread)
        if state is not None and self._live is not None:
            self._show(state)

    @property
    def live(self) -> LiveRefresh | None:
        return self._live

    def start_auto_refresh(self, seconds: float = SLOW_EVERY_S) -> None:
        """Start the live thread: ranks every second (or ``seconds`` if shorter), the rest every
        ``seconds``."""
        if not seconds or seconds <= 0:
            raise MlpMagicError("auto-refresh period must be positive, got %r" % seconds)
        self.stop_auto_refresh()
        self.auto_refresh_seconds = float(seconds)
        seconds = float(seconds)
        self._live = start_live(self, self._world_of, seconds, min(FAST_EVERY_S, seconds))
        self._sync_toggle()

    def stop_auto_refresh(self) -> None:
        live, self._live, self.auto_refresh_seconds = self._live, None, None
        if live is not None:
            live.stop()
        self._sync_toggle()

    def live_ended(self, live: LiveRefresh) -> None:
        """From the live thread as it ends (its World stopped, or it was stopped)."""
        if self._live is live:
            self._live, self.auto_refresh_seconds = None, None
            self._sync_toggle()

    def _collect_quietly(self, collect: Callable[[], ClusterState] | None = None
                         ) -> ClusterState | None:
        """A timer's collect: a failure is kept in ``last_error`` and the last state stays shown."""
        try:
            return (collect or self._collect)()
        except Exception as exc:  # a timer has no caller to raise to
            self.last_error = "%s: %s" % (type(exc).__name__, exc)
            return None

    def close(self) -> None:
        """Stop the live thread and close the widgets."""
        self.stop_auto_refresh()
        with self._drawing:
            root, ranks = self._widgets.get("root"), self._widgets.get("ranks")
            if ranks is not None:
                ranks.close()
            if root is not None:
                _close_tree(root)
            self._widgets = {}

    # -- reprs
    def __repr__(self) -> str:
        """The text face, for a frontend without widgets: it ends with where the dashboard is."""
        dashboard = self.where_dashboard() if self.where_dashboard else None
        return view_text(self.state, self.shown_rows, dashboard)

    def _repr_html_(self) -> str:
        return state_html(self.state)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The live widget, plus text/html and text/plain for nbconvert and terminals."""
        bundle = dict(self.widget._repr_mimebundle_())
        bundle["text/plain"] = repr(self)
        bundle["text/html"] = self._repr_html_()
        return bundle

    # -- widgets
    @property
    def widget(self) -> Any:
        if not self._widgets:
            self._build()
        return self._widgets["root"]

    def _build(self) -> None:
        import ipywidgets as w

        refresh = w.Button(description="Refresh", icon="refresh", tooltip="collect the cluster state now")
        refresh.on_click(lambda _button: self.refresh())
        auto = w.ToggleButton(description="Live", value=self._live is not None,
                              tooltip="update while cells run: ranks each second, the rest every few seconds")
        auto.observe(self._on_toggle, names="value")
        title, hosts, tabs, ranks = w.HTML(), w.HTML(), w.Tab(), RankLines()
        root = w.VBox([w.HBox([title, refresh, auto]), ranks.box, hosts, tabs])
        root.add_class("mlp-cluster")
        with self._drawing:
            self._widgets = {"root": root, "title": title, "hosts": hosts, "tabs": tabs, "auto": auto,
                             "refresh": refresh, "ranks": ranks}
            self._redraw()
            ranks.show(self.shown_rows)

    def _on_toggle(self, change: Mapping) -> None:
        if change["new"] and self._live is None:
            self.start_auto_refresh(self.auto_refresh_seconds or SLOW_EVERY_S)
        elif not change["new"] and self._live is not None:
            self.stop_auto_refresh()

    def _sync_toggle(self) -> None:
        toggle = self._widgets.get("auto")
        if toggle is not None and toggle.value != (self._live is not None):
            toggle.value = self._live is not None

    def _redraw(self) -> None:
        state, parts = self.state, self._widgets
        _set(parts["title"], "<b>%s</b>" % html.escape(state.error or title(state)))
        _set(parts["hosts"], table_html(host_rows(state), "mlp-cluster-hosts") if not state.error else "")
        tabs, kept = parts["tabs"], parts.setdefault("host_tabs", {})
        selected, fresh = tabs.selected_index, {}
        for host in state.hosts:
            fresh[host.name] = _reuse_or_build(kept.get(host.name), host)
        children = tuple(fresh[host.name].widget for host in state.hosts)
        if children != tuple(tabs.children):
            tabs.children = children
            tabs.titles = tuple(host.name for host in state.hosts)
        if selected is not None and selected < len(children) and tabs.selected_index != selected:
            tabs.selected_index = selected
        for name, old in kept.items():
            if fresh.get(name) is not old:
                _close_tree(old.widget)
        parts["host_tabs"] = fresh


def _set(widget: Any, value: Any) -> None:
    """Set a value only when it differs (a trait set to an equal value sends nothing either)."""
    if widget.value != value:
        widget.value = value


def _close_tree(widget: Any) -> None:
    """Close a widget, its children and its layout/style models (shared ones close once)."""
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    for part in (getattr(widget, "layout", None), getattr(widget, "style", None)):
        if part is not None:
            part.close()
    widget.close()


@dataclass
class _HostTab:
    """One host's tab and what it was built from; only the bars change between refreshes."""

    widget: Any
    layout: Any          # everything but memory used and utilisation: a change rebuilds the tab
    bars: list[Any]      # one HBox per GPU, updated in place


def _layout_of(host: HostView) -> Any:
    if host.gpus is None:
        return None
    data = host.gpus.to_dict()
    for gpu in data["gpus"]:
        gpu.pop("memory_used_mib")
        gpu.pop("utilization_pct")
    return data, tuple(host.hints)


def _reuse_or_build(old: _HostTab | None, host: HostView) -> _HostTab:
    """The old tab with its bars updated when the host's layout is unchanged, else a new tab.

    Rebuilding costs one widget per matrix cell (hundreds on an 8-GPU, 12-NIC host), so a
    refresh that only sees new memory/utilisation numbers moves the bars and nothing else.
    """
    layout = _layout_of(host)
    if old is not None and old.layout == layout:
        for bar, gpu in zip(old.bars, host.gpus.gpus if host.gpus else []):
            _set_bars(bar, gpu)
        return old
    return _host_widget(host, layout)


def _host_widget(host: HostView, layout: Any) -> _HostTab:
    """One host's tab: coloured link matrix, legend, memory/utilisation bars, NIC affinity, hints."""
    import ipywidgets as w

    gpus = host.gpus
    if gpus is None or not gpus.gpus:
        return _HostTab(w.HTML(host_html(host)), layout, [])
    bars = [_gpu_bars(g) for g in gpus.gpus]
    parts = [_matrix_grid(gpus), w.HTML(legend_html()), w.VBox(bars),
             w.HTML(table_html(nic_affinity_rows(gpus), "mlp-nics"))]
    if host.hints:
        parts.append(w.HTML("".join("<div>&#9888; %s</div>" % html.escape(h) for h in host.hints)))
    return _HostTab(w.VBox(parts), layout, bars)


def _matrix_grid(gpus: HostGpus) -> Any:
    import ipywidgets as w

    devices = gpus.devices()
    # Cells share one Layout and one style model: a 20-device host has 441 cells, and three
    # models per cell would triple what the front end has to create.
    corner = w.HTML("")
    shared = {"layout": corner.layout, "style": corner.style}
    cells = [corner] + [w.HTML("<b>%s</b>" % html.escape(d), **shared) for d in devices]
    for a in devices:
        cells.append(w.HTML("<b>%s</b>" % html.escape(a), **shared))
        cells += [w.HTML(link_cell_html(gpus.link(a, b)), **shared) for b in devices]
    columns = "repeat(%d, max-content)" % (len(devices) + 1)
    grid = w.GridBox(cells, layout=w.Layout(grid_template_columns=columns, grid_gap="1px 1px",
                                            width="max-content"))
    grid.add_class("mlp-matrix")
    return grid


def _gpu_bars(g: Any) -> Any:
    import ipywidgets as w

    bars = w.HBox([
        w.Label(g.device, layout=w.Layout(width="4em")),
        w.FloatProgress(min=0.0, max=1.0, description="memory"),
        w.Label(layout=w.Layout(width="11em")),
        w.FloatProgress(min=0.0, max=1.0, description="util", bar_style="success"),
        w.Label(layout=w.Layout(width="5em")),
        w.Label(g.name or ""),
    ])
    _set_bars(bars, g)
    return bars


def _set_bars(bars: Any, g: Any) -> None:
    _, memory_gauge, memory_label, util_gauge, util_label, _ = bars.children
    memory, memory_text = memory_bar(g)
    util, util_text = util_bar(g)
    memory_gauge.value, memory_label.value = memory or 0.0, memory_text
    memory_gauge.bar_style = "danger" if (memory or 0) > 0.9 else "info"
    util_gauge.value, util_label.value = util or 0.0, util_text


def cluster_view(*, hostfile: str | None = None, hosts: str | None = None, gpus: Any = None,
                 probe: bool = True, timeout: float = 5.0, check_reachable: bool = True,
                 auto_refresh: float | None = None, state_dir: str | None = None,
                 env: Mapping[str, str] | None = None, world: Any = None, ssh: Any = None,
                 world_of: Callable[[], Any] | None = None) -> ClusterView:
    """The cluster of this job (or of ``hostfile`` / ``hosts``) as a ClusterView.

    ``gpus``: inventories to show instead of probing, {host: HostGpus or a saved
    `nvidia-smi topo -m` file}. The other hosts' GPUs come from the running World's engines
    (one per host), hosts no World covers over ssh (``ssh``: the client command, default
    ``$MLP_MAGIC_SSH`` or ``ssh``), this machine's from a local probe, all within about
    ``timeout`` seconds; ``probe=False`` probes nothing. ``check_reachable=False`` skips
    the ssh-port probes. ``auto_refresh``: seconds of the live thread's slow part (its ranks'
    states every second); None: a static view. ``world``: a World other than this kernel's
    ``%%mpirun`` one; ``world_of``: where the live thread finds the World (default: that one).
    """
    options = CollectOptions(hostfile=hostfile, hosts=hosts, gpus="all" if probe else "none", timeout=timeout,
                             reach_timeout=min(timeout, 2.0) if check_reachable else None, ssh=ssh,
                             state_dir=state_dir, env=env)
    if world_of is None:
        world_of = (lambda: world) if world is not None else kernel_world
    if world is None:
        world = world_of()
    view = ClusterView(StateCollector(options, load_inventories(gpus), world), world_of=world_of)
    if auto_refresh:
        view.start_auto_refresh(auto_refresh)
    return view


def cluster_verb(context, options) -> ClusterView:
    """``%mlp_cluster``: this kernel's World, hosts and GPUs as a widget (the magic's value), live
    unless ``--static``."""
    topo_files: dict = {}
    for host, path in options.gpus or ():
        if host in topo_files:
            raise MlpMagicError(f"%mlp_cluster: --topo-file gives host {host!r} twice")
        topo_files[host] = path
    live = None if options.static else (options.auto_refresh or SLOW_EVERY_S)
    return cluster_view(hostfile=options.hostfile, hosts=options.hosts, auto_refresh=live,
                        timeout=options.timeout, probe=options.probe, gpus=topo_files or None,
                        world=context.owner.world, world_of=lambda: context.owner.world)
