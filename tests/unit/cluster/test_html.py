"""The HTML face: what nbconvert keeps of the widget."""
from __future__ import annotations

from mlp_magic.cluster.html import link_colours, state_html
from mlp_magic.cluster.pure.model import ClusterState
from mlp_magic.cluster.text import state_text
from tests.unit.cluster.states import Cells, two_host_state


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
