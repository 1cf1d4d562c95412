"""gpu/pure/model: a host's GPU inventory read back from JSON (``mlp-magic topo --json`` over ssh,
an engine's answer, a published World): Infinity, NaN, huge ints, wrong types and odd keys are
one "bad JSON" for that host, never a traceback later, where the faces format and sort them."""
from __future__ import annotations

import json

from hypothesis import example, given

from mlp_magic.cluster.html import matrix_html, nic_affinity_rows
from mlp_magic.cluster.text import gpu_lines, topo_text
from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.gpu.pure.hints import host_hints
from mlp_magic.gpu.pure.model import HostGpus, parse_topo_answer
from tests.unit.fuzz_checks import FUZZ, only_our_error
from tests.unit.hostile_json import dumps, hostile, replaced

INVENTORY = {"host": "w0", "source": "nvml", "error": None, "nics": ["mlx5_0"],
             "gpus": [{"index": i, "name": "NVIDIA H200", "pci_bus_id": f"0000:1{i}:00.0",
                       "memory_total_mib": 143771, "memory_used_mib": 1024, "utilization_pct": 10 * i,
                       "numa_node": i, "cpu_affinity": "0-23"} for i in range(2)],
             "links": {"GPU0": {"GPU0": "X", "GPU1": "NV18", "mlx5_0": "PXB"},
                       "GPU1": {"GPU0": "NV18", "GPU1": "X", "mlx5_0": "SYS"},
                       "mlx5_0": {"GPU0": "PXB", "GPU1": "SYS", "mlx5_0": "X"}}}


RANKS = topology_from_environment({}, hosts="w0:2").layout(2)   # local ranks 0 and 1: GPUs 0 and 1


def test_an_inventory_round_trips_through_json():
    assert HostGpus.from_json(json.dumps(INVENTORY)).to_dict() == INVENTORY


@FUZZ
@given(hostile(INVENTORY))
@example(replaced(INVENTORY, ("gpus", 0, "index"), float("inf")))   # old code: OverflowError in "GPU%d"
@example(replaced(INVENTORY, ("gpus", 1, "numa_node"), "12"))   # old code: TypeError sorting nodes
@example(replaced(INVENTORY, ("links", "GPU1", "mlx5_0"), ""))   # old code: ValueError ranking the link
@example(replaced(INVENTORY, ("error",), float("nan")))   # old code: "NaN" in the panel's document
@example(replaced(replaced(INVENTORY, ("error",), ""), ("gpus",), []))   # old code: "" kept as an error
def test_a_hostile_inventory_is_read_whole_or_is_that_hosts_bad_json(doc):
    gpus = parse_topo_answer("w0", dumps({"w0": doc}))
    assert gpus.host == "w0" and (gpus.gpus or gpus.error is None or gpus.error.startswith("bad JSON"))
    assert topo_text(gpus) and gpu_lines(gpus) is not None and matrix_html(gpus)
    assert host_hints(gpus, RANKS) is not None and nic_affinity_rows(gpus)
    assert gpus.error is None or "\n" not in gpus.error
    json.dumps(gpus.to_dict(), allow_nan=False)
    only_our_error(HostGpus.from_json, dumps(doc))
