"""examples/04-cluster-view.ipynb executes in a real kernel and shows the cluster it promises."""
from __future__ import annotations

import os
import re

import pytest

from mlp_magic.demo import run_notebook
from tests import worlds

NOTEBOOK = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "04-cluster-view.ipynb")
CPU_ONLY = not os.path.exists("/dev/nvidiactl")
pytestmark = [pytest.mark.notebook, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def notebook():
    # A World an earlier test left running in this process is published beside the notebook's own,
    # and the cluster view counts every published World's engines: none may be there.
    worlds.stop_world()
    return run_notebook(NOTEBOOK)


def outputs(notebook, source: str) -> list:
    """The outputs of the code cells whose source is exactly ``source``, in order."""
    found = [cell.outputs for cell in notebook.cells if cell.cell_type == "code" and cell.source == source]
    assert found, f"no cell is {source!r}"
    return found


def cell_starting(notebook, start: str):
    [cell] = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(start)]
    return cell.outputs


def stream_text(cell_outputs) -> str:
    return "".join(o.get("text", "") for o in cell_outputs if o.output_type == "stream")


def table_rows(text: str) -> list:
    """The host table of a text repr: its rows split on runs of 2+ spaces, header first."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["host", "slots"])
    rows = []
    for line in lines[start:]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def test_no_cell_failed(notebook):
    errors = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs
              if o.output_type == "error"]
    assert errors == []


def test_embedded_default_renders_this_machine(notebook):
    [shown] = outputs(notebook, "%mlp_cluster")[0]
    data = shown["data"]
    assert "application/vnd.jupyter.widget-view+json" in data  # the live widget
    text = data["text/plain"]
    assert text.startswith("local machine: 1 host, ")
    header, row = table_rows(text)
    assert header == ["host", "slots", "ranks", "reachable", "engines", "GPUs"]
    assert row[0] == "localhost" and row[3] == "yes" and row[4] == "no engines"
    if CPU_ONLY:
        assert row[5] == "none"  # a CPU-only host renders cleanly
        assert "no GPU (CPU-only host)" in data["text/html"]
    assert '<table class="mlp-cluster-hosts">' in data["text/html"]


def test_saved_topology_on_two_hosts(notebook):
    [shown] = cell_starting(notebook, "from mlp_magic.cluster.widget import cluster_view")
    text, page = shown["data"]["text/plain"], shown["data"]["text/html"]
    assert text.startswith("-H hgx0:8,hgx1:8: 2 hosts, 16 slots, master hgx0")
    assert table_rows(text)[1:] == [["hgx0", "8", "0-7", "?", "no engines", "8 x GPU"],
                                    ["hgx1", "8", "8-15", "?", "no engines", "8 x GPU"]]
    gpu0 = [line.split() for line in text.splitlines() if line.startswith("GPU0 ")]
    assert gpu0[0][:10] == ["GPU0", "X"] + ["NV18"] * 7 + ["PXB"]
    assert "GPU5: memory n/a, util n/a, NUMA 1, CPUs 56-111,168-223, nearest NIC mlx5_9 (PXB)" in text
    # HTML (what nbconvert keeps): per host a coloured 20x20 matrix, 56 NV18 cells in each.
    assert page.count('class="mlp-matrix"') == 2
    assert len(re.findall(r'<div class="mlp-link" style="background:#1b5e20;[^"]*">NV18</div>', page)) == 112
    assert ">SYS</div>" in page and "NVLink, # links bonded" in page and "across the CPU socket" in page


def test_the_widget_state_holds_both_host_tabs(notebook):
    state = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    tabs = [m["state"].get("titles") for m in state.values() if m["model_name"] == "TabModel"]
    assert ["hgx0", "hgx1"] in tabs
    grids = [m for m in state.values() if m["model_name"] == "GridBoxModel"]
    assert len(grids) == 2 and all(len(g["state"]["children"]) == 21 * 21 for g in grids)


def test_hints(notebook):
    hints = stream_text(cell_starting(notebook, "for host in hgx.state.hosts")).splitlines()
    assert hints == [
        "hint: hgx0: ranks 0-7 span NUMA nodes 0,1 (node 0: ranks 0-3; node 1: ranks 4-7); pin each rank to "
        "its GPU's CPUs (cpu_affinity) or memory and PCIe traffic cross the socket",
        "hint: hgx1: ranks 8-15 span NUMA nodes 0,1 (node 0: ranks 8-11; node 1: ranks 12-15); pin each rank "
        "to its GPU's CPUs (cpu_affinity) or memory and PCIe traffic cross the socket",
    ]


def test_command_output(notebook):
    printed = stream_text(cell_starting(notebook, "from mlp_magic.cli import main")).splitlines()
    assert printed[0] == "hgx0 (nvidia-smi): 8 GPUs, 12 NICs"
    rows = {line.split()[0]: line.split() for line in printed if line.strip()}
    assert rows["GPU7"][1:10] == ["NV18"] * 7 + ["X", "SYS"]
    assert rows["mlx5_1"][10:12] == ["X", "PIX"]
    assert "  NV#  = a bonded set of # NVLinks" in printed
    as_json = stream_text(cell_starting(notebook, "import contextlib, io, json"))
    assert as_json == "GPU0-GPU7: NV18 | GPU0-mlx5_0: PXB | GPU0-mlx5_6: SYS\n"


def test_with_a_world_the_engines_show(notebook):
    [shown] = outputs(notebook, "%mlp_cluster")[1]
    text = shown["data"]["text/plain"]
    [row] = table_rows(text)[1:]
    assert row[:5] == ["localhost", "2", "0-1", "yes", "2 engines: 2 idle"]
    if CPU_ONLY:
        assert row[5] == "none"  # from the engine of local rank 0
    assert "stopped the World of 2 ranks" in stream_text(outputs(notebook, "%mpirun --stop")[0])
