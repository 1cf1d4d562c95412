"""One-line hints, computed from the real captures."""
from __future__ import annotations

from pathlib import Path

from mlp_magic.core.topology import Rank
from mlp_magic.gpu.pure.hints import far_nic_hint, host_hints, nearest_nic, numa_span_hint
from mlp_magic.gpu.pure.model import HostGpus
from mlp_magic.gpu.pure.smi_topo import parse_topo_matrix

TOPO = Path(__file__).resolve().parents[3] / "fixtures" / "topo"


def capture(name: str) -> HostGpus:
    return parse_topo_matrix((TOPO / name).read_text(), host="worker0")


def ranks(first_rank: int, count: int):
    return [Rank(first_rank + i, "worker0", 1, i, count) for i in range(count)]


def test_eight_ranks_over_two_sockets():
    hint = numa_span_hint(capture("hgx-h200-8gpu-12nic.txt"), ranks(8, 8))
    assert hint == ("worker0: ranks 8-15 span NUMA nodes 0,1 (node 0: ranks 8-11; node 1: ranks 12-15); "
                    "pin each rank to its GPU's CPUs (cpu_affinity) or memory and PCIe traffic "
                    "cross the socket")


def test_ranks_on_one_socket_give_no_hint():
    assert numa_span_hint(capture("hgx-h200-8gpu-12nic.txt"), ranks(0, 4)) is None
    assert numa_span_hint(capture("h100-4gpu-8nic.txt"), ranks(0, 4)) is None
    assert numa_span_hint(HostGpus(host="cpu0"), ranks(0, 4)) is None  # CPU-only host


def test_nearest_nic():
    dgx1 = capture("dgx1-v100-8gpu-2nic.txt")
    assert nearest_nic(dgx1, "GPU2") == "mlx5_0"
    assert nearest_nic(dgx1, "GPU5") == "mlx5_1"
    assert nearest_nic(capture("hgx-h200-8gpu-12nic.txt"), "GPU3") == "mlx5_5"
    assert nearest_nic(HostGpus(host="cpu0"), "GPU0") is None


def test_gpus_whose_only_nic_is_across_the_socket():
    dgx1 = capture("dgx1-v100-8gpu-2nic.txt")
    assert far_nic_hint(dgx1) is None  # every GPU has a NIC on its own socket
    # The same machine with mlx5_1 unplugged: GPU4-7 reach mlx5_0 only over SYS.
    dgx1.nics.remove("mlx5_1")
    for row in dgx1.links.values():
        row.pop("mlx5_1")
    assert far_nic_hint(dgx1) == ("worker0: GPU 4-7 reach their nearest NIC only across the socket (SYS); "
                                  "inter-node traffic from them crosses the CPU interconnect")
    assert len(host_hints(dgx1, ranks(0, 8))) == 2


def test_quiet_hosts_give_no_hints():
    assert host_hints(capture("h100-4gpu-8nic.txt"), ranks(0, 4)) == []  # one socket, PHB NICs
    assert host_hints(HostGpus(host="cpu0"), ranks(0, 4)) == []  # CPU-only
