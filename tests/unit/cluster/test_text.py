"""The widget's plain-text face."""
from __future__ import annotations

import re

from mlp_magic.cluster.text import state_text
from tests.unit.cluster.states import two_host_state


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
