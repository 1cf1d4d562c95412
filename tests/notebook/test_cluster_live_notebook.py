"""%mlp_cluster is live in a notebook run by nbclient (as Jupyter runs it): the widget state the
notebook keeps holds what the view's kernel thread sent after its cell ended: the World's ranks
dead once the World stopped (no cell of the view's redraws them: the thread does)."""
from __future__ import annotations

import pytest

from mlp_magic.demo import execute_notebook
from tests import worlds

pytestmark = [pytest.mark.notebook, pytest.mark.timeout(600)]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def rank_lines(notebook) -> list:
    """The values of the rank-line widgets in the notebook's saved widget state."""
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return [m["state"].get("value", "") for m in state.values()
            if "mlp-rank-line" in str(m.get("state", {}).get("value", ""))]


def test_the_widget_follows_the_ranks_after_its_cell(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    worlds.stop_world()
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in (
        "%load_ext mlp_magic",
        "%%mpirun -np 2\npass",
        "view = %mlp_cluster --no-probe\nview",
        "%%mpirun --ranks 1\nimport time\ntime.sleep(3)",
        "%mpirun --stop\nimport time\ntime.sleep(2.5)\n"
        "print(view.live is None)",
    )]
    execute_notebook(notebook, str(tmp_path))
    printed = "".join(o.get("text", "") for o in notebook.cells[-1].outputs)
    assert printed.strip().endswith("True"), printed   # the thread ended with the World
    lines = rank_lines(notebook)
    assert lines and all("2 dead" in line for line in lines), lines
    assert "ranks (live):" in notebook.cells[2].outputs[0]["data"]["text/plain"]
