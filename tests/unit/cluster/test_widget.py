"""The cluster view: pure state and renderers, the ipywidgets view, refreshing, a real kernel."""
from __future__ import annotations

import asyncio
import os
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mlp_magic.cluster_view import (
    ClusterState, ClusterView, StateCollector, cluster_state, cluster_view, link_colours, load_inventories,
    parse_cluster_args, state_html, state_text,
)
from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu import HostGpus, parse_query_gpu, parse_topo_matrix
from mlp_magic.gpu.smi_topo import merge_query
from mlp_magic.server.reachability import Reachability
from mlp_magic.topology import topology_from_environment
from mlp_magic.world_state import publish

TOPO = Path(__file__).resolve().parents[1] / "fixtures" / "topo"
H200 = TOPO / "hgx-h200-8gpu-12nic.txt"
DGX1 = TOPO / "dgx1-v100-8gpu-2nic.txt"
QUERY = "\n".join("%d, NVIDIA H200, 00000000:%02X:00.0, 143771, %d, %d"
                  % (i, 0x18 + i, 140000 if i == 5 else 1024, 10 * i) for i in range(8))
NO_GPU_HERE = not os.path.exists("/dev/nvidiactl")


@pytest.fixture(autouse=True)
def no_world_of_this_process(monkeypatch):
    """These tests give the view its World, if any, themselves. A World an integration test left
    running in this pytest process (it is reused across tests, as in a notebook) stays out."""
    monkeypatch.setattr("mlp_magic.cluster_view._running_world", lambda: None)


def h200(host: str = "worker0") -> HostGpus:
    return merge_query(parse_topo_matrix(H200.read_text(), host=host), parse_query_gpu(QUERY))


def two_host_state() -> ClusterState:
    topology = topology_from_environment({}, hosts="worker0:8,worker1:8")
    worlds = [{"pid": 1, "ranks": [{"rank": r, "host": "worker0", "engine_id": 10 + r,
                                    "state": "busy" if r == 3 else "idle"} for r in range(8)]}]
    reach = {"worker0": Reachability(True, 0.3, None),
             "worker1": Reachability(False, 1000.0, "port 22: connection refused")}
    return cluster_state(topology, [h200(), HostGpus(host="worker1", source="none")], worlds, reach,
                         updated_at="12:00:00")


# ----------------------------------------------------------------------------------- state

def test_state_of_two_hosts():
    state = two_host_state()
    assert (state.source, state.total_slots, state.master_addr) == ("-H worker0:8,worker1:8", 16, "worker0")
    worker0, worker1 = state.hosts
    assert (worker0.name, worker0.slots, worker0.ranks, worker0.reachable) == (
        "worker0", 8, list(range(8)), True)
    assert worker0.engine_summary == "8 engines: 1 busy, 7 idle"
    assert worker0.gpus.links["GPU0"]["mlx5_0"] == "PXB"
    assert worker0.hints == ["worker0: ranks 0-7 span NUMA nodes 0,1 (node 0: ranks 0-3; node 1: ranks 4-7); "
                             "pin each rank to its GPU's CPUs (cpu_affinity) or memory and PCIe traffic "
                             "cross the socket"]
    assert (worker1.ranks, worker1.reachable, worker1.reach_error) == (
        list(range(8, 16)), False, "port 22: connection refused")
    assert worker1.engine_summary == "no engines" and worker1.gpus.gpus == []


def test_local_names_are_one_host():
    topology = topology_from_environment({}, hosts="127.0.0.1:2")
    worlds = [{"pid": 1, "ranks": [{"rank": 0, "host": "myhost", "engine_id": 0, "state": "idle"}]}]
    state = cluster_state(topology, [h200("localhost")], worlds, {},
                          local_names=["localhost", "127.0.0.1", "myhost"])
    [host] = state.hosts
    assert host.gpus is not None and len(host.gpus.gpus) == 8
    assert host.engine_summary == "1 engine: 1 idle" and host.reachable is None


def test_unprobed_host():
    state = cluster_state(topology_from_environment({}, hosts="worker9:4"))
    assert state.hosts[0].gpus is None and state.hosts[0].hints == []
    assert "worker9  4      0-3    ?          no engines  not probed" in state_text(state)


# ------------------------------------------------------------------------------- renderers

def test_text_repr():
    text = state_text(two_host_state())
    lines = text.splitlines()
    assert lines[0] == "-H worker0:8,worker1:8: 2 hosts, 16 slots, master worker0, updated 12:00:00"
    assert lines[1].split() == ["host", "slots", "ranks", "reachable", "engines", "GPUs"]
    assert re.split(r"\s{2,}", lines[2]) == ["worker0", "8", "0-7", "yes", "8 engines: 1 busy, 7 idle",
                                             "8 x NVIDIA H200"]
    assert re.split(r"\s{2,}", lines[3]) == ["worker1", "8", "8-15", "no (port 22: connection refused)",
                                             "no engines", "none"]
    assert lines[2].index("yes") == lines[3].index("no (port")  # aligned columns
    assert "== worker0 ==" in lines
    assert any(line.split()[:10] == ["GPU0", "X"] + ["NV18"] * 7 + ["PXB"] for line in lines)
    assert ("GPU5 NVIDIA H200: 136.7 / 140.4 GiB, 50%, NUMA 1, CPUs 56-111,168-223, "
            "nearest NIC mlx5_9 (PXB)") in lines
    assert lines[-1].startswith("hint: worker0: ranks 0-7 span NUMA nodes 0,1")
    assert "<" not in text


class Cells(HTMLParser):
    """Text of every table cell, and the style of every element, in document order."""

    def __init__(self):
        super().__init__()
        self.tables, self.styles, self.text = {}, [], []
        self._table, self._row = None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(attrs.get("class"), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        if "style" in attrs:
            self.styles.append(attrs["style"])

    def handle_data(self, data):
        self.text.append(data)
        if self._row is not None and data.strip():
            self._row.append(data.strip())

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None


def test_html_repr_has_host_table_matrix_legend_and_bars():
    page = Cells()
    page.feed(state_html(two_host_state()))
    hosts = page.tables["mlp-cluster-hosts"]
    assert hosts[0] == ["host", "slots", "ranks", "reachable", "engines", "GPUs"]
    assert hosts[1] == ["worker0", "8", "0-7", "yes", "8 engines: 1 busy, 7 idle", "8 x NVIDIA H200"]
    assert hosts[2][:4] == ["worker1", "8", "8-15", "no (port 22: connection refused)"]
    matrix = page.tables["mlp-matrix"]
    assert len(matrix) == 21 and matrix[0][:2] == ["GPU0", "GPU1"]
    assert matrix[1][:3] == ["GPU0", "X", "NV18"] and matrix[1][9] == "PXB"
    nics = page.tables["mlp-nics"]
    assert nics[6] == ["GPU5", "1", "56-111,168-223", "mlx5_9", "PXB"]
    text = "".join(page.text)
    assert "NVLink, # links bonded" in text and "across the CPU socket" in text
    assert "136.7 / 140.4 GiB" in text and "no GPU (CPU-only host)" in text
    assert any("width:97%" in style for style in page.styles)  # GPU5 memory bar


def test_nvlink_pcie_and_sys_look_different():
    nv, pix, phb, sys_ = (link_colours(x)[0] for x in ("NV18", "PIX", "PHB", "SYS"))
    assert len({nv, pix, phb, sys_}) == 4
    assert link_colours("NV1")[0] != link_colours("NV18")[0]  # more links, deeper green


def test_error_state_renders_escaped():
    state = ClusterState("?", "?", 0, [], error="bad hostfile <x>, line 2")
    assert state_text(state) == "cluster: bad hostfile <x>, line 2\n"
    assert "bad hostfile &lt;x&gt;, line 2" in state_html(state)


# -------------------------------------------------------------------------------- widget

class Sequenced:
    """A collector answering a fixed series of states (the view under test holds no logic)."""

    def __init__(self, *states):
        self.states, self.calls = list(states), 0

    def __call__(self):
        self.calls += 1
        return self.states[min(self.calls - 1, len(self.states) - 1)]


def test_widget_structure():
    view = ClusterView(Sequenced(two_host_state()))
    root = view.widget
    header, hosts, tabs = root.children
    assert "2 hosts, 16 slots" in header.children[0].value
    assert 'class="mlp-cluster-hosts"' in hosts.value and "8 engines: 1 busy, 7 idle" in hosts.value
    assert tabs.titles == ("worker0", "worker1")
    grid, legend, bars, nics = tabs.children[0].children[:4]
    assert type(grid).__name__ == "GridBox" and len(grid.children) == 21 * 21
    cell = grid.children[21 + 2]  # row GPU0, column GPU1
    assert "NV18" in cell.value and link_colours("NV18")[0] in cell.value
    sys_cell = grid.children[21 * 5 + 9]  # row GPU4, column mlx5_0
    assert "SYS" in sys_cell.value and link_colours("SYS")[0] in sys_cell.value
    assert "across the CPU socket" in legend.value
    memory = bars.children[5].children[1]
    assert memory.description == "memory" and memory.value == pytest.approx(140000 / 143771)
    assert memory.bar_style == "danger" and bars.children[5].children[2].value == "136.7 / 140.4 GiB"
    assert bars.children[3].children[3].value == pytest.approx(0.3)
    assert "mlx5_9" in nics.value
    assert "no GPU (CPU-only host)" in tabs.children[1].value
    view.close()


def test_refresh_button_redraws_moves_bars_in_place_and_closes_old_widgets():
    first = two_host_state()
    busier = h200()
    busier.gpus[0].memory_used_mib, busier.gpus[0].utilization_pct = 100000, 99
    second = cluster_state(topology_from_environment({}, hosts="worker0:8"), [busier], updated_at="12:00:05")
    third = cluster_state(topology_from_environment({}, hosts="worker0:8"),
                          [parse_topo_matrix(DGX1.read_text(), host="worker0")], updated_at="12:00:10")
    collect = Sequenced(first, second, third)
    view = ClusterView(collect)
    header, _, tabs = view.widget.children
    worker0_tab, worker1_tab = tabs.children
    header.children[1].click()  # the Refresh button
    assert collect.calls == 2 and view.refresh_count == 1
    assert tabs.titles == ("worker0",) and "updated 12:00:05" in header.children[0].value
    # Same links on worker0: the tab (hundreds of cell widgets) stays, its bars move.
    assert tabs.children == (worker0_tab,)
    bars = worker0_tab.children[2].children[0].children
    assert bars[1].value == pytest.approx(100000 / 143771) and bars[4].value == "99%"
    assert worker1_tab.comm is None  # the host left: its tab is closed, not leaked in the front end
    view.refresh()  # worker0 now shows another machine's matrix: a new tab
    assert tabs.children[0] is not worker0_tab and worker0_tab.comm is None
    assert len(tabs.children[0].children[0].children) == 11 * 11
    view.close()
    assert tabs.comm is None
    cell = worker0_tab.children[0].children[5]
    assert cell.layout is worker0_tab.children[0].children[6].layout  # cells share their layout model
    assert cell.layout.comm is None and cell.style.comm is None  # and it is closed with them
    assert view.widget is not tabs  # a fresh widget tree can be built again
    view.close()


def test_reprs_survive_without_a_front_end():
    view = ClusterView(Sequenced(two_host_state()))
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "application/vnd.jupyter.widget-view+json"}
    assert bundle["text/plain"] == repr(view) == state_text(view.state)
    assert bundle["text/html"] == view._repr_html_() == state_html(view.state)
    view.close()


def test_auto_refresh_in_a_thread_outside_an_event_loop():
    collect = Sequenced(two_host_state())
    view = ClusterView(collect)
    toggle = view.widget.children[0].children[2]
    toggle.value = True  # the Auto-refresh toggle
    view.stop_auto_refresh()
    assert toggle.value is False
    view.start_auto_refresh(0.05)
    assert toggle.value is True
    deadline = time.monotonic() + 5
    while view.refresh_count < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    view.stop_auto_refresh()
    count = view.refresh_count
    assert count >= 3
    time.sleep(0.2)
    assert view.refresh_count <= count + 1  # at most one collect was already under way
    with pytest.raises(MlpMagicError, match="must be positive"):
        view.start_auto_refresh(0)
    view.close()


def test_a_failing_timer_collect_keeps_the_last_state():
    def broken():
        raise OSError("state dir vanished")

    view = ClusterView(broken, state=two_host_state())
    view.start_auto_refresh(0.05)
    deadline = time.monotonic() + 5
    while view.last_error is None and time.monotonic() < deadline:
        time.sleep(0.02)
    view.stop_auto_refresh()
    assert view.last_error == "OSError: state dir vanished"
    assert view.state.hosts[0].name == "worker0" and view.refresh_count == 0


def test_auto_refresh_on_a_running_loop_never_blocks_it():
    def slow_collect():
        time.sleep(0.2)  # a slow probe: must run off the loop
        return two_host_state()

    async def main():
        view = ClusterView(slow_collect, state=two_host_state())
        view.start_auto_refresh(0.05)
        assert isinstance(view._auto, asyncio.Task)
        ticks, started = 0, time.monotonic()
        while time.monotonic() - started < 1.0:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            assert time.monotonic() - before < 0.15  # the loop stays responsive
            ticks += 1
        view.stop_auto_refresh()
        return view.refresh_count, ticks

    count, ticks = asyncio.run(main())
    assert count >= 2 and ticks > 20


# ------------------------------------------------------------------------------ collecting

def test_collector_with_saved_topology_and_published_world(tmp_path):
    saved = tmp_path / "worker1-topo.txt"
    saved.write_text(DGX1.read_text())
    publish({"pid": os.getpid(), "np": 2, "mpi": "openmpi",
             "ranks": [{"rank": 0, "host": "localhost", "engine_id": 0, "state": "idle"},
                       {"rank": 1, "host": "localhost", "engine_id": 1, "state": "busy"}]},
            str(tmp_path / "worlds"))
    view = cluster_view(hosts="localhost:2,worker1:8", gpus={"worker1": saved}, check_reachable=False,
                        state_dir=str(tmp_path / "worlds"), timeout=3.0)
    local, worker1 = view.state.hosts
    assert local.engine_summary == "2 engines: 1 busy, 1 idle"
    assert worker1.gpus.links["GPU6"]["mlx5_1"] == "PIX" and worker1.gpus.host == "worker1"
    if NO_GPU_HERE:
        assert local.gpus.source == "none" and local.gpus.gpus == []
    view.close()


def test_hosts_no_world_covers_go_over_ssh_and_this_machine_in_process(tmp_path):
    # `false` as the ssh client: no network here, and what it says comes back as hgx1's error
    # (the real ssh path runs in tests/multihost/test_gpu_collect_ssh.py). This machine is
    # probed in-process, never through that client.
    started = time.monotonic()
    view = cluster_view(hosts="localhost:2,hgx1:8", ssh="false", check_reachable=False,
                        state_dir=str(tmp_path), timeout=3.0)
    assert time.monotonic() - started < 3.0
    local, hgx1 = view.state.hosts
    assert (hgx1.gpus.host, hgx1.gpus.source, hgx1.gpus.gpus, hgx1.gpus.error) == (
        "hgx1", "none", [], "exit 1: no message")
    row = "hgx1       8      2-9    ?          no engines  none (exit 1: no message)"
    assert row in state_text(view.state).splitlines()
    assert local.gpus.host == "localhost" and local.gpus.error is None
    view.close()
    # $MLP_MAGIC_SSH of the collector's environment names the client when ``ssh`` does not.
    view = cluster_view(hosts="hgx1:8", env={"MLP_MAGIC_SSH": "no-such-ssh-client"},
                        check_reachable=False, state_dir=str(tmp_path), timeout=3.0)
    assert view.state.hosts[0].gpus.error == "--ssh: cannot find the command 'no-such-ssh-client'"
    view.close()


def test_embedded_default_reaches_this_machine(tmp_path):
    view = cluster_view(env={}, state_dir=str(tmp_path), timeout=3.0)
    [host] = view.state.hosts
    assert view.state.source == "local machine" and host.reachable is True
    assert host.ranks == list(range(host.slots))
    view.close()


def test_collector_errors():
    state = StateCollector(hostfile="/nonexistent/hostfile", check_reachable=False)()
    assert state.error and "/nonexistent/hostfile" in state.error and state.hosts == []
    with pytest.raises(MlpMagicError, match="cannot read /nonexistent/topo.txt"):
        load_inventories({"w": "/nonexistent/topo.txt"})
    with pytest.raises(MlpMagicError, match="expected {host: HostGpus"):
        load_inventories({"w": 42})
    assert [g.host for g in load_inventories([h200("w3")])] == ["w3"]
    with pytest.raises(MlpMagicError, match="timeout must be positive"):
        StateCollector(timeout=0)


# ------------------------------------------------------------------------------ a kernel

@pytest.mark.slow
def test_in_a_real_kernel_auto_refresh_runs_between_cells_and_html_survives_export(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nbconvert = pytest.importorskip("nbconvert")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "from mlp_magic.cluster_view import cluster_view\n"
            "view = cluster_view(hosts='localhost:2,worker1:8', gpus={'worker1': %r}, check_reachable=False, "
            "state_dir=%r, auto_refresh=0.2)\nview" % (str(H200), str(tmp_path))),
        nbformat.v4.new_code_cell("import asyncio\nawait asyncio.sleep(1.5)\nprint(view.refresh_count >= 3)\n"
                                  "view.stop_auto_refresh()"),
    ]
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = nb.cells[0].outputs[0]["data"]
    assert {"text/plain", "text/html", "application/vnd.jupyter.widget-view+json"} <= set(shown)
    assert nb.cells[1].outputs[0]["text"] == "True\n"
    page, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    assert "mlp-cluster-hosts" in page and "worker1" in page
    nb.metadata.pop("widgets", None)  # without saved widget state nbconvert falls back to text/html
    page, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    assert 'class="mlp-cluster-hosts"' in page and "NVLink, # links bonded" in page


def test_a_running_worlds_ranks_are_shown_rather_than_a_full_job():
    topology = topology_from_environment({}, hosts="worker0:8,worker1:8")
    state = cluster_state(topology, layout=topology.layout(4))
    assert [h.ranks for h in state.hosts] == [[0, 1, 2, 3], []]


# ------------------------------------------------------------------------ magic arguments

def test_cluster_args_defaults_and_every_option():
    assert parse_cluster_args("") == {"hostfile": None, "hosts": None, "auto_refresh": None, "timeout": 5.0,
                                      "probe": True, "gpus": None}
    args = parse_cluster_args("-H gpu[0-1]:8 --refresh 2.5 --timeout=3 --no-probe "
                              "--topo-file gpu0=topo/a.txt --topo-file='gpu1=my topo.txt'")
    assert args == {"hostfile": None, "hosts": "gpu[0-1]:8", "auto_refresh": 2.5, "timeout": 3.0,
                    "probe": False, "gpus": {"gpu0": "topo/a.txt", "gpu1": "my topo.txt"}}
    assert parse_cluster_args("--hostfile ~/hosts")["hostfile"] == "~/hosts"


@pytest.mark.parametrize("line, message", [
    ("--refresh soon", "--refresh expects a number of seconds > 0, got 'soon'"),
    ("--refresh 0", "--refresh expects a number of seconds > 0, got '0'"),
    ("--timeout=-1", "--timeout expects a number of seconds > 0, got '-1'"),
    ("--refresh nan", "--refresh expects a number of seconds > 0, got 'nan'"),
    ("--topo-file gpu0", "--topo-file expects HOST=FILE (a saved `nvidia-smi topo -m`), got 'gpu0'"),
    ("--topo-file =a.txt", "--topo-file expects HOST=FILE"),
    ("--topo-file a=1 --topo-file a=2", "--topo-file gives host 'a' twice"),
    ("-H", "-H needs a value"),
    ("-H ''", "-H needs a non-empty value"),
    ("-H a:1 -H b:1", "-H given twice"),
    ("--hostfile f -H a:1", "give --hostfile or -H, not both"),
    ("--no-probe=yes", "--no-probe takes no value, got 'yes'"),
    ("--bogus", "unknown argument '--bogus' (usage: %mlp_cluster [--hostfile FILE"),
    ("worker0", "unknown argument 'worker0'"),
    ("-H 'unclosed", "cannot split \"-H 'unclosed\": No closing quotation"),
])
def test_cluster_args_errors(line, message):
    with pytest.raises(MlpMagicError) as caught:
        parse_cluster_args(line)
    assert str(caught.value).startswith("%mlp_cluster: " + message)


def test_cluster_args_feed_cluster_view(tmp_path):
    saved = tmp_path / "h200.txt"
    saved.write_text(H200.read_text())
    args = parse_cluster_args("-H hgx0:8,hgx1:8 --topo-file hgx0=%s --no-probe" % saved)
    view = cluster_view(check_reachable=False, state_dir=str(tmp_path), **args)
    hgx0, hgx1 = view.state.hosts
    assert hgx0.gpus.links["GPU0"]["GPU7"] == "NV18" and hgx1.gpus is None
    view.close()
