"""``%mlp_cluster``: hosts, slots, ranks, engines and GPU topology, as a widget.

Three layers, in this order in the file:
- the state (``ClusterState``, ``cluster_state``): pure values built from a Topology, the
  hosts' ``HostGpus``, the published Worlds and reachability;
- pure renderers of a state: ``state_text`` (terminals, logs) and ``state_html`` (nbconvert);
- ``ClusterView``: collects a state (the only I/O), shows it with ipywidgets core widgets
  (HTML, GridBox, Tab, progress bars; no custom JS), refreshes on request or on a timer.
ipywidgets is imported only when a widget is built, so the first two layers stay pure.
"""
from __future__ import annotations

import asyncio
import html
import os
import shlex
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .errors import MlpMagicError
from .gpu import HostGpus, format_topo_matrix, host_hints, nearest_nic, parse_topo_matrix
from .ranges import fold_ranks

LOCAL = "<local>"


# ----------------------------------------------------------------------------------- state

@dataclass(frozen=True)
class EngineInfo:
    rank: Optional[int]
    engine_id: Optional[int]
    state: str  # "idle" | "busy" | "dead" as the World publishes it


@dataclass
class HostView:
    name: str
    slots: int
    ranks: List[int]                 # the ranks a full job (every slot) places here
    reachable: Optional[bool]        # None: not checked
    reach_error: Optional[str] = None
    engines: List[EngineInfo] = field(default_factory=list)
    gpus: Optional[HostGpus] = None  # None: not probed
    hints: List[str] = field(default_factory=list)

    @property
    def engine_summary(self) -> str:
        """"8 engines: 7 idle, 1 busy" or "no engines"."""
        if not self.engines:
            return "no engines"
        counts: Dict[str, int] = {}
        for engine in self.engines:
            counts[engine.state] = counts.get(engine.state, 0) + 1
        states = ", ".join("%d %s" % (n, s) for s, n in sorted(counts.items()))
        return "%d engine%s: %s" % (len(self.engines), "" if len(self.engines) == 1 else "s", states)


@dataclass
class ClusterState:
    source: str
    master_addr: str
    total_slots: int
    hosts: List[HostView]
    updated_at: str = ""
    error: Optional[str] = None


def _key(name: str, local_names: Iterable[str]) -> str:
    """All names of this machine ("localhost", its hostname, 127.0.0.1) are one host."""
    return LOCAL if name.lower() in local_names else name.lower()


def _reach(value: Any) -> tuple:
    """(reachable, error) from a Reachability, a bool, or None."""
    if value is None or isinstance(value, bool):
        return value, None
    return getattr(value, "reachable", None), getattr(value, "error", None)


def _engines_by_host(worlds: Sequence[Mapping], local_names: Iterable[str]) -> Dict[str, List[EngineInfo]]:
    found: Dict[str, List[EngineInfo]] = {}
    for world in worlds:
        for rank in world.get("ranks") or []:
            if isinstance(rank, Mapping) and isinstance(rank.get("host"), str):
                info = EngineInfo(rank.get("rank"), rank.get("engine_id"), str(rank.get("state", "?")))
                found.setdefault(_key(rank["host"], local_names), []).append(info)
    for engines in found.values():
        engines.sort(key=lambda e: (e.rank is None, e.rank or 0))
    return found


def cluster_state(topology: Any, inventories: Iterable[HostGpus] = (), worlds: Sequence[Mapping] = (),
                  reachability: Optional[Mapping[str, Any]] = None, local_names: Iterable[str] = (),
                  updated_at: str = "", layout: Optional[Sequence[Any]] = None) -> ClusterState:
    """The whole picture, from values only.

    ``topology``: a topology.Topology; ``inventories``: HostGpus whose ``host`` names a topology
    host; ``worlds``: world_state records; ``reachability``: host name -> Reachability or bool;
    ``layout``: the ranks to show (a running World's), else those of a job on every slot.
    """
    local_names = {n.lower() for n in local_names}
    gpus_by_key = {_key(g.host, local_names): g for g in inventories}
    engines = _engines_by_host(worlds, local_names)
    if layout is not None:
        ranks = list(layout)
    else:
        ranks = topology.layout(topology.total_slots) if topology.total_slots else []
    hosts = []
    for host in topology.hosts:
        key = _key(host.name, local_names)
        reachable, error = _reach((reachability or {}).get(host.name))
        placed = [r for r in ranks if r.host == host.name]
        gpus = gpus_by_key.get(key)
        hosts.append(HostView(
            name=host.name, slots=host.slots, ranks=[r.rank for r in placed],
            reachable=reachable, reach_error=error, engines=engines.get(key, []), gpus=gpus,
            hints=host_hints(gpus, placed) if gpus is not None else [],
        ))
    return ClusterState(source=topology.source, master_addr=topology.master_addr,
                        total_slots=topology.total_slots, hosts=hosts, updated_at=updated_at)


# ------------------------------------------------------------------------- pure renderers

# Link colours: NVLink in greens (darker = more links), PCIe within a socket in blues and
# yellow, crossing host bridges in orange, crossing the socket (SYS) in red.
LINK_COLOURS = {
    "X": ("#e0e0e0", "#555555"), "NV-": ("#a5d6a7", "#1b1b1b"), "NV": ("#43a047", "#ffffff"),
    "NV+": ("#1b5e20", "#ffffff"), "PIX": ("#90caf9", "#1b1b1b"), "PXB": ("#bbdefb", "#1b1b1b"),
    "PHB": ("#fff59d", "#1b1b1b"), "NODE": ("#ffcc80", "#1b1b1b"), "SYS": ("#ef9a9a", "#1b1b1b"),
}
LEGEND = [("NV#", "NV", "NVLink, # links bonded"), ("PIX", "PIX", "one PCIe switch"),
          ("PXB", "PXB", "several PCIe switches"), ("PHB", "PHB", "through the CPU's host bridge"),
          ("NODE", "NODE", "across host bridges, same NUMA node"), ("SYS", "SYS", "across the CPU socket")]


def link_colours(link: Optional[str]) -> tuple:
    """(background, text colour) of a matrix cell."""
    if link is None:
        return "#ffffff", "#999999"
    if link.startswith("NV"):
        count = int(link[2:])
        return LINK_COLOURS["NV-" if count < 2 else "NV" if count < 8 else "NV+"]
    return LINK_COLOURS.get(link, ("#ffffff", "#1b1b1b"))


def link_cell_html(link: Optional[str]) -> str:
    background, colour = link_colours(link)
    return ('<div class="mlp-link" style="background:%s;color:%s;text-align:center;padding:2px 4px;'
            'font-family:monospace">%s</div>' % (background, colour, html.escape(link or "?")))


def legend_html() -> str:
    swatches = "".join('<span style="display:inline-block;margin-right:10px">%s %s</span>'
                       % (_swatch(sample, name), html.escape(meaning)) for name, sample, meaning in LEGEND)
    return '<div class="mlp-legend" style="font-size:90%%">%s</div>' % swatches


def _swatch(sample: str, name: str) -> str:
    background, colour = link_colours("NV4" if sample == "NV" else sample)
    return ('<span style="background:%s;color:%s;padding:1px 6px;font-family:monospace">%s</span>'
            % (background, colour, html.escape(name)))


def _reachable_text(host: HostView) -> str:
    text = {True: "yes", False: "no", None: "?"}[host.reachable]
    return text + (" (%s)" % host.reach_error if host.reach_error else "")


def _gpus_text(host: HostView) -> str:
    gpus = host.gpus
    if gpus is None:
        return "not probed"
    if not gpus.gpus:
        return "none" + (" (%s)" % gpus.error if gpus.error else "")
    names = sorted({g.name or "GPU" for g in gpus.gpus})
    return "%d x %s" % (len(gpus.gpus), ", ".join(names))


def host_rows(state: ClusterState) -> List[List[str]]:
    """The host table, header first: host, slots, ranks, reachable, engines, GPUs."""
    rows = [["host", "slots", "ranks", "reachable", "engines", "GPUs"]]
    for host in state.hosts:
        rows.append([host.name, str(host.slots), fold_ranks(host.ranks) or "-", _reachable_text(host),
                     host.engine_summary, _gpus_text(host)])
    return rows


def _title(state: ClusterState) -> str:
    return "%s: %d host%s, %d slots, master %s%s" % (
        state.source, len(state.hosts), "" if len(state.hosts) == 1 else "s", state.total_slots,
        state.master_addr, ", updated %s" % state.updated_at if state.updated_at else "")


def gpu_lines(gpus: HostGpus) -> List[str]:
    """One line per GPU: name, memory, utilisation, NUMA node, nearest NIC."""
    lines = []
    for g in gpus.gpus:
        memory = ("%.1f / %.1f GiB" % (g.memory_used_mib / 1024, g.memory_total_mib / 1024)
                  if g.memory_used_mib is not None and g.memory_total_mib else "memory n/a")
        util = "%d%%" % g.utilization_pct if g.utilization_pct is not None else "util n/a"
        nic = nearest_nic(gpus, g.device)
        near = "%s (%s)" % (nic, gpus.link(g.device, nic)) if nic else "no NIC"
        lines.append("%s%s: %s, %s, NUMA %s, CPUs %s, nearest NIC %s" % (
            g.device, " " + g.name if g.name else "", memory, util,
            "n/a" if g.numa_node is None else g.numa_node,
            g.cpu_affinity or "n/a", near))
    return lines


def state_text(state: ClusterState) -> str:
    """Plain text: title, host table, then per host its matrix, GPUs and hints."""
    if state.error:
        return "cluster: %s\n" % state.error
    rows = host_rows(state)
    widths = [max(len(r[i]) for r in rows) + 2 for i in range(len(rows[0]))]
    lines = [_title(state)] + ["".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    for host in state.hosts:
        if host.gpus is None or not host.gpus.gpus:
            continue
        matrix = format_topo_matrix(host.gpus).split("\n\nLegend:")[0]
        lines += ["", "== %s ==" % host.name, matrix] + gpu_lines(host.gpus)
    lines += ["hint: %s" % h for host in state.hosts for h in host.hints]
    return "\n".join(lines) + "\n"


def _table_html(rows: List[List[str]], css_class: str) -> str:
    head = "".join("<th style=\"text-align:left;padding:2px 8px\">%s</th>" % html.escape(c) for c in rows[0])
    cell = "<td style=\"padding:2px 8px\">%s</td>"
    body = "".join("<tr>%s</tr>" % "".join(cell % html.escape(c) for c in row) for row in rows[1:])
    return '<table class="%s"><thead><tr>%s</tr></thead><tbody>%s</tbody></table>' % (css_class, head, body)


def matrix_html(gpus: HostGpus) -> str:
    devices = gpus.devices()
    head = "<tr><th></th>%s</tr>" % "".join(
        "<th style=\"padding:2px 4px\">%s</th>" % html.escape(d) for d in devices)
    rows = "".join("<tr><th style=\"text-align:left;padding:2px 4px\">%s</th>%s</tr>" % (
        html.escape(a), "".join("<td style=\"padding:1px\">%s</td>" % link_cell_html(gpus.link(a, b))
                                for b in devices)) for a in devices)
    return '<table class="mlp-matrix" style="border-collapse:collapse">%s%s</table>' % (head, rows)


def bar_html(fraction: Optional[float], label: str, colour: str = "#42a5f5") -> str:
    width = 0 if fraction is None else max(0.0, min(1.0, fraction)) * 100
    return ('<span class="mlp-bar" style="display:inline-block;width:120px;height:10px;background:#eeeeee;'
            'vertical-align:middle"><span style="display:block;width:%.0f%%;height:10px;background:%s">'
            '</span></span> %s' % (width, colour, html.escape(label)))


def _memory(g: Any) -> tuple:
    if g.memory_used_mib is None or not g.memory_total_mib:
        return None, "memory n/a"
    return g.memory_used_mib / g.memory_total_mib, "%.1f / %.1f GiB" % (
        g.memory_used_mib / 1024, g.memory_total_mib / 1024)


def _util(g: Any) -> tuple:
    if g.utilization_pct is None:
        return None, "util n/a"
    return g.utilization_pct / 100, "%d%%" % g.utilization_pct


def nic_affinity_rows(gpus: HostGpus) -> List[List[str]]:
    rows = [["GPU", "NUMA", "CPUs", "nearest NIC", "link"]]
    for g in gpus.gpus:
        nic = nearest_nic(gpus, g.device)
        rows.append([g.device, "-" if g.numa_node is None else str(g.numa_node), g.cpu_affinity or "-",
                     nic or "-", gpus.link(g.device, nic) if nic else "-"])
    return rows


def host_html(host: HostView) -> str:
    """One host's section: matrix and legend, bars, NIC affinity, hints."""
    gpus = host.gpus
    if gpus is None:
        return "<p>%s: GPUs not probed</p>" % html.escape(host.name)
    if not gpus.gpus:
        return "<p>%s: no GPU (CPU-only host)%s</p>" % (
            html.escape(host.name), html.escape("; %s" % gpus.error) if gpus.error else "")
    bars = "".join("<div>%s %s %s %s</div>" % (
        html.escape(g.device), bar_html(*_memory(g)), bar_html(*_util(g), colour="#66bb6a"),
        html.escape(g.name or "")) for g in gpus.gpus)
    hints = "".join("<div class=\"mlp-hint\">&#9888; %s</div>" % html.escape(h) for h in host.hints)
    return "".join([matrix_html(gpus), legend_html(), '<div class="mlp-bars">%s</div>' % bars,
                    _table_html(nic_affinity_rows(gpus), "mlp-nics"), hints])


def state_html(state: ClusterState) -> str:
    """Self-contained HTML (inline styles only): what nbconvert keeps of the widget."""
    if state.error:
        return '<div class="mlp-cluster"><b>cluster</b>: %s</div>' % html.escape(state.error)
    sections = "".join("<h4>%s</h4>%s" % (html.escape(h.name), host_html(h)) for h in state.hosts)
    return '<div class="mlp-cluster"><div><b>%s</b></div>%s%s</div>' % (
        html.escape(_title(state)), _table_html(host_rows(state), "mlp-cluster-hosts"), sections)


# ------------------------------------------------------------------------------ collecting

InventorySource = Union[HostGpus, str, "os.PathLike[str]"]


def load_inventories(gpus: Union[None, Mapping[str, InventorySource], Sequence[HostGpus]]) -> List[HostGpus]:
    """HostGpus per host from HostGpus objects or saved `nvidia-smi topo -m` files.

    ``gpus``: a mapping host -> HostGpus or file path, or a sequence of HostGpus (their
    ``host`` says where they belong).
    """
    if gpus is None:
        return []
    if isinstance(gpus, Mapping):
        items = list(gpus.items())
    else:
        items = [(getattr(g, "host", None), g) for g in gpus]
    loaded = []
    for host, value in items:
        if isinstance(value, HostGpus):
            loaded.append(HostGpus.from_dict(dict(value.to_dict(), host=host or value.host)))
        elif isinstance(value, (str, os.PathLike)) and host:
            path = os.fspath(value)
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError as exc:
                raise MlpMagicError("cannot read %s: %s" % (path, exc.strerror or exc)) from None
            loaded.append(parse_topo_matrix(text, host=host, source=path))
        else:
            raise MlpMagicError("gpus: expected {host: HostGpus or saved `nvidia-smi topo -m` file} or a "
                                "list of HostGpus, got %r for %r" % (type(value).__name__, host))
    return loaded


def _in_background(work: Callable[[], Any], timeout: float, default: Any) -> Callable[[], Any]:
    """Start work() in a daemon thread now (its own event loop if it wants one); the returned
    function waits for it until ``timeout`` seconds after the start and gives its result, or
    ``default`` when it failed or is late."""
    box = [default]
    deadline = time.monotonic() + timeout

    def run() -> None:
        try:
            box[0] = work()
        except Exception:  # a failed probe shows as "?" rather than breaking the view
            pass

    worker = threading.Thread(target=run, name="mlp-cluster-collect", daemon=True)
    worker.start()

    def result() -> Any:
        worker.join(max(0.0, deadline - time.monotonic()))
        return box[0] if not worker.is_alive() else default

    return result


def _running_world() -> Any:
    """This kernel's World, if %%mpirun started one (never imports the magics to find out)."""
    module = sys.modules.get("mlp_magic.mpirun_command")
    return module.current_world() if module is not None else None


class StateCollector:
    """The I/O behind a ClusterState: topology, GPUs, reachability, engines.

    With a World running in this kernel (or ``world`` given), its topology and ranks are shown
    (unless ``hostfile``/``hosts`` say otherwise), each host's GPUs come from one of its
    engines and the engine states from ``world.state()``; this machine is probed directly
    when no engine told us about it. Hosts no World covers are probed over ssh
    (``gpu.collect.collect_over_ssh``: ``ssh`` or ``$MLP_MAGIC_SSH``). Reachability probes,
    engines and ssh all run at once, each within about ``timeout`` seconds.
    """

    def __init__(self, *, hostfile: Optional[str] = None, hosts: Optional[str] = None, gpus: Any = None,
                 probe: bool = True, timeout: float = 5.0, check_reachable: bool = True,
                 state_dir: Optional[str] = None, env: Optional[Mapping[str, str]] = None, world: Any = None,
                 ssh: Any = None):
        if timeout <= 0:
            raise MlpMagicError("cluster view: timeout must be positive, got %r" % timeout)
        self.hostfile, self.hosts, self.env, self.state_dir = hostfile, hosts, env, state_dir
        self.ssh = ssh
        self.inventories = load_inventories(gpus)
        self.probe, self.timeout, self.check_reachable = probe, timeout, check_reachable
        self.world = world

    def __call__(self) -> ClusterState:
        from .server.reachability import local_host_names

        now = datetime.now().strftime("%H:%M:%S")
        world = self.world if self.world is not None else _running_world()
        try:
            topology = self._topology(world)
        except MlpMagicError as exc:
            return ClusterState(source="?", master_addr="?", total_slots=0, hosts=[], updated_at=now,
                                error=str(exc))
        local_names = local_host_names()
        reachability = self._start_reachability(topology)
        over_ssh = self._start_ssh_collect(world, topology, local_names)
        inventories = self.inventories + self._world_inventories(world, topology, local_names)
        from_ssh = over_ssh()
        inventories += from_ssh + self._local_probe(topology, local_names, inventories + from_ssh,
                                                    tried=from_ssh)
        layout = world.layout if world is not None and topology is world.spec.topology else None
        return cluster_state(topology, inventories, self._worlds(world), reachability(), local_names,
                             updated_at=now, layout=layout)

    def _topology(self, world: Any) -> Any:
        if world is not None and not (self.hostfile or self.hosts):
            return world.spec.topology
        from .topology import topology_from_environment

        return topology_from_environment(self.env, hostfile=self.hostfile, hosts=self.hosts)

    def _world_inventories(self, world: Any, topology: Any, local_names: Iterable[str]) -> List[HostGpus]:
        """One engine per host of the World probes its host, except hosts given or not shown."""
        if world is None or not self.probe:
            return []
        from .gpu.collect import collect_from_world

        shown = {_key(h.name, local_names) for h in topology.hosts}
        given = {_key(g.host, local_names) for g in self.inventories}
        skip = [row.host for row in world.layout
                if _key(row.host, local_names) not in shown or _key(row.host, local_names) in given]
        return list(collect_from_world(world, self.timeout, skip=skip).values())

    def _start_ssh_collect(self, world: Any, topology: Any,
                           local_names: Iterable[str]) -> Callable[[], List[HostGpus]]:
        """Start probing the hosts that no World engine and no given inventory covers, over ssh
        (this machine in-process), while the engines answer; the returned function waits for it."""
        if not self.probe:
            return list
        given = {_key(g.host, local_names) for g in self.inventories}
        covered = {_key(row.host, local_names) for row in world.layout} if world is not None else set()
        hosts = [h for h in topology.hosts if _key(h.name, local_names) not in given | covered]
        if not hosts:
            return list
        from .gpu.collect import collect_over_ssh

        env = os.environ if self.env is None else self.env
        return _in_background(
            lambda: list(collect_over_ssh(hosts, ssh=self.ssh, timeout=self.timeout,
                                          connect_timeout=self.timeout, local_names=local_names,
                                          env=env).values()),
            self.timeout + 1.0, [])

    def _local_probe(self, topology: Any, local_names: Iterable[str], known: List[HostGpus],
                     tried: List[HostGpus]) -> List[HostGpus]:
        """This machine's GPUs, under the name the topology gives it, unless known already
        (an engine that did not answer does not count: this machine can be asked directly)
        or ``tried`` already (the ssh collect probes it in-process when no World covers it)."""
        from .gpu import probe_local

        answered = {_key(g.host, local_names) for g in known if g.gpus or not g.error}
        answered |= {_key(g.host, local_names) for g in tried}
        here = [h.name for h in topology.hosts if _key(h.name, local_names) == LOCAL]
        if not self.probe or not here or LOCAL in answered:
            return []
        return [probe_local(timeout=self.timeout, host=here[0])]

    def _start_reachability(self, topology: Any) -> Callable[[], Dict[str, Any]]:
        if not self.check_reachable:
            return dict
        from .server.reachability import probe_hosts

        return _in_background(lambda: asyncio.run(probe_hosts(topology.hosts, min(self.timeout, 2.0))),
                              self.timeout + 1.0, {})

    def _worlds(self, world: Any) -> List[Mapping]:
        """Published Worlds of other kernels, and this kernel's own from the World itself."""
        from .world_state import read_worlds

        try:
            worlds = read_worlds(self.state_dir)
        except (OSError, ValueError):
            worlds = []
        if world is None:
            return worlds
        return [w for w in worlds if w.get("pid") != os.getpid()] + [world.state()]


# ---------------------------------------------------------------------------------- widget

class ClusterView:
    """The cluster as a widget; ``state`` holds everything shown, the widgets hold no logic.

    ``refresh()`` (or the Refresh button) collects a new state; ``start_auto_refresh(seconds)``
    does so on a timer without blocking the kernel (an asyncio task on the kernel's loop, the
    collecting itself in a worker thread). ``repr()`` is plain text, ``_repr_html_()`` static HTML.
    """

    def __init__(self, collect: Callable[[], ClusterState], state: Optional[ClusterState] = None):
        self._collect = collect
        self.state = state if state is not None else collect()
        self.refresh_count = 0
        self.last_error: Optional[str] = None
        self.auto_refresh_seconds: Optional[float] = None
        self._auto: Any = None
        self._widgets: Dict[str, Any] = {}

    # -- refreshing
    def refresh(self) -> ClusterState:
        """Collect now and redraw; returns the new state."""
        self._show(self._collect())
        return self.state

    def _show(self, state: ClusterState) -> None:
        self.state = state
        self.refresh_count += 1
        if self._widgets:
            self._redraw()

    def start_auto_refresh(self, seconds: float = 5.0) -> None:
        if not seconds or seconds <= 0:
            raise MlpMagicError("auto-refresh period must be positive, got %r" % seconds)
        self.stop_auto_refresh()
        self.auto_refresh_seconds = float(seconds)
        try:
            loop = asyncio.get_running_loop()  # inside a kernel: its loop runs between cells
        except RuntimeError:
            loop = None
        if loop is not None:
            self._auto = loop.create_task(self._tick_async(float(seconds)))
        else:
            stop = threading.Event()
            worker = threading.Thread(target=self._tick_thread, args=(float(seconds), stop),
                                      name="mlp-cluster-refresh", daemon=True)
            self._auto = stop
            worker.start()
        self._sync_toggle()

    def stop_auto_refresh(self) -> None:
        auto, self._auto, self.auto_refresh_seconds = self._auto, None, None
        if isinstance(auto, threading.Event):
            auto.set()
        elif auto is not None:
            auto.cancel()
        self._sync_toggle()

    def _collect_quietly(self) -> Optional[ClusterState]:
        """A timer's collect: a failure is kept in ``last_error`` and the last state stays shown."""
        try:
            return self._collect()
        except Exception as exc:  # a timer has no caller to raise to
            self.last_error = "%s: %s" % (type(exc).__name__, exc)
            return None

    async def _tick_async(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(seconds)
            state = await loop.run_in_executor(None, self._collect_quietly)
            if state is not None:
                self._show(state)

    def _tick_thread(self, seconds: float, stop: threading.Event) -> None:
        while not stop.wait(seconds):
            state = self._collect_quietly()
            if state is not None and not stop.is_set():
                self._show(state)

    def close(self) -> None:
        """Stop refreshing and close the widgets."""
        self.stop_auto_refresh()
        root = self._widgets.get("root")
        if root is not None:
            _close_tree(root)
        self._widgets = {}

    # -- reprs
    def __repr__(self) -> str:
        return state_text(self.state)

    def _repr_html_(self) -> str:
        return state_html(self.state)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Dict[str, Any]:
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
        auto = w.ToggleButton(description="Auto-refresh 5 s", value=self._auto is not None,
                              tooltip="refresh every 5 seconds")
        auto.observe(self._on_toggle, names="value")
        title, hosts, tabs = w.HTML(), w.HTML(), w.Tab()
        root = w.VBox([w.HBox([title, refresh, auto]), hosts, tabs])
        root.add_class("mlp-cluster")
        self._widgets = {"root": root, "title": title, "hosts": hosts, "tabs": tabs, "auto": auto,
                         "refresh": refresh}
        self._redraw()

    def _on_toggle(self, change: Mapping) -> None:
        if change["new"] and self._auto is None:
            self.start_auto_refresh(self.auto_refresh_seconds or 5.0)
        elif not change["new"] and self._auto is not None:
            self.stop_auto_refresh()

    def _sync_toggle(self) -> None:
        toggle = self._widgets.get("auto")
        if toggle is not None and toggle.value != (self._auto is not None):
            toggle.value = self._auto is not None

    def _redraw(self) -> None:
        state, parts = self.state, self._widgets
        parts["title"].value = "<b>%s</b>" % html.escape(state.error or _title(state))
        parts["hosts"].value = _table_html(host_rows(state), "mlp-cluster-hosts") if not state.error else ""
        tabs, kept = parts["tabs"], parts.setdefault("host_tabs", {})
        selected, fresh = tabs.selected_index, {}
        for host in state.hosts:
            fresh[host.name] = _reuse_or_build(kept.get(host.name), host)
        children = tuple(fresh[host.name].widget for host in state.hosts)
        if children != tuple(tabs.children):
            tabs.children = children
            tabs.titles = tuple(host.name for host in state.hosts)
        if selected is not None and selected < len(children):
            tabs.selected_index = selected
        for name, old in kept.items():
            if fresh.get(name) is not old:
                _close_tree(old.widget)
        parts["host_tabs"] = fresh


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
    bars: List[Any]      # one HBox per GPU, updated in place


def _layout_of(host: HostView) -> Any:
    if host.gpus is None:
        return None
    data = host.gpus.to_dict()
    for gpu in data["gpus"]:
        gpu.pop("memory_used_mib")
        gpu.pop("utilization_pct")
    return data, tuple(host.hints)


def _reuse_or_build(old: Optional[_HostTab], host: HostView) -> _HostTab:
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
             w.HTML(_table_html(nic_affinity_rows(gpus), "mlp-nics"))]
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
    _, memory_bar, memory_label, util_bar, util_label, _ = bars.children
    memory, memory_text = _memory(g)
    util, util_text = _util(g)
    memory_bar.value, memory_label.value = memory or 0.0, memory_text
    memory_bar.bar_style = "danger" if (memory or 0) > 0.9 else "info"
    util_bar.value, util_label.value = util or 0.0, util_text


def cluster_view(*, hostfile: Optional[str] = None, hosts: Optional[str] = None, gpus: Any = None,
                 probe: bool = True, timeout: float = 5.0, check_reachable: bool = True,
                 auto_refresh: Optional[float] = None, state_dir: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None, world: Any = None, ssh: Any = None) -> ClusterView:
    """The cluster of this job (or of ``hostfile`` / ``hosts``) as a ClusterView.

    ``gpus``: inventories to show instead of probing, {host: HostGpus or a saved
    `nvidia-smi topo -m` file}. The other hosts' GPUs come from the running World's engines
    (one per host), hosts no World covers over ssh (``ssh``: the client command, default
    ``$MLP_MAGIC_SSH`` or ``ssh``), this machine's from a local probe, all within about
    ``timeout`` seconds; ``probe=False`` probes nothing. ``check_reachable=False`` skips
    the ssh-port probes. ``auto_refresh``: seconds. ``world``: a World other than this
    kernel's ``%%mpirun`` one.
    """
    view = ClusterView(StateCollector(hostfile=hostfile, hosts=hosts, gpus=gpus, probe=probe, timeout=timeout,
                                      check_reachable=check_reachable, state_dir=state_dir, env=env,
                                      world=world, ssh=ssh))
    if auto_refresh:
        view.start_auto_refresh(auto_refresh)
    return view


# ------------------------------------------------------------------------ magic arguments

CLUSTER_USAGE = ("%mlp_cluster [--hostfile FILE | -H HOSTS] [--refresh SECONDS] [--timeout SECONDS] "
                 "[--no-probe] [--topo-file HOST=FILE]...")


def _usage_error(message: str, usage: bool = False) -> MlpMagicError:
    return MlpMagicError("%%mlp_cluster: %s%s" % (message, " (usage: %s)" % CLUSTER_USAGE if usage else ""))


def _seconds(option: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise _usage_error("%s expects a number of seconds > 0, got %r" % (option, value))
    return seconds


def _topo_file(value: str, given: Mapping[str, str]) -> tuple:
    host, sep, path = value.partition("=")
    if not sep or not host.strip() or not path.strip():
        raise _usage_error("--topo-file expects HOST=FILE (a saved `nvidia-smi topo -m`), got %r" % value)
    if host.strip() in given:
        raise _usage_error("--topo-file gives host %r twice" % host.strip())
    return host.strip(), path.strip()


# option -> (keyword of cluster_view, takes a value)
_CLUSTER_OPTIONS = {"--hostfile": ("hostfile", True), "-H": ("hosts", True), "--hosts": ("hosts", True),
                    "--refresh": ("auto_refresh", True), "--timeout": ("timeout", True),
                    "--no-probe": ("probe", False), "--topo-file": ("gpus", True)}


def parse_cluster_args(line: str) -> Dict[str, Any]:
    """The keywords of ``cluster_view()`` for a ``%mlp_cluster`` line. Pure; MlpMagicError on bad input.

    ``--hostfile FILE`` or ``-H HOSTS``; ``--refresh S``: auto-refresh every S seconds;
    ``--timeout S``: per-host probe timeout; ``--no-probe``: no GPU probing;
    ``--topo-file HOST=FILE`` (repeatable): HOST's saved `nvidia-smi topo -m` text.
    Options also take ``--option=value``.
    """
    try:
        words = shlex.split(line or "")
    except ValueError as exc:
        raise _usage_error("cannot split %r: %s" % (line, exc)) from None
    found: Dict[str, Any] = {}
    topo_files: Dict[str, str] = {}
    position = 0
    while position < len(words):
        option, sep, inline = words[position].partition("=") if words[position].startswith("--") \
            else (words[position], "", "")
        if option not in _CLUSTER_OPTIONS:
            raise _usage_error("unknown argument %r" % words[position], usage=True)
        keyword, takes_value = _CLUSTER_OPTIONS[option]
        position += 1
        if not takes_value:
            if sep:
                raise _usage_error("%s takes no value, got %r" % (option, inline))
            found[keyword] = False
            continue
        if sep:
            value = inline
        elif position < len(words):
            value, position = words[position], position + 1
        else:
            raise _usage_error("%s needs a value" % option)
        if keyword == "gpus":
            host, path = _topo_file(value, topo_files)
            topo_files[host] = path
        elif keyword in found:
            raise _usage_error("%s given twice" % option)
        elif keyword in ("auto_refresh", "timeout"):
            found[keyword] = _seconds(option, value)
        elif not value.strip():
            raise _usage_error("%s needs a non-empty value" % option)
        else:
            found[keyword] = value
    if "hostfile" in found and "hosts" in found:
        raise _usage_error("give --hostfile or -H, not both")
    return {"hostfile": found.get("hostfile"), "hosts": found.get("hosts"),
            "auto_refresh": found.get("auto_refresh"), "timeout": found.get("timeout", 5.0),
            "probe": found.get("probe", True), "gpus": topo_files or None}
