"""Shared by the cluster tests: real topology captures, and a two-host state built from them."""
import os
from html.parser import HTMLParser
from pathlib import Path

from mlp_magic.cluster.pure.model import ClusterState, cluster_state
from mlp_magic.cluster.reachability import Reachability
from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.gpu import HostGpus, parse_query_gpu, parse_topo_matrix
from mlp_magic.gpu.pure.smi_topo import merge_query

TOPO = Path(__file__).resolve().parents[2] / "fixtures" / "topo"
H200 = TOPO / "hgx-h200-8gpu-12nic.txt"
DGX1 = TOPO / "dgx1-v100-8gpu-2nic.txt"
QUERY = "\n".join("%d, NVIDIA H200, 00000000:%02X:00.0, 143771, %d, %d"
                  % (i, 0x18 + i, 140000 if i == 5 else 1024, 10 * i) for i in range(8))
NO_GPU_HERE = not os.path.exists("/dev/nvidiactl")


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
