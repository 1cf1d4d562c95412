"""parse_topo_matrix against the real `nvidia-smi topo -m` captures in tests/fixtures/topo/."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu.pure.model import HostGpus
from mlp_magic.gpu.pure.smi_topo import format_topo_matrix, merge_query, parse_query_gpu, parse_topo_matrix

TOPO = Path(__file__).resolve().parents[3] / "fixtures" / "topo"
DGX1 = TOPO / "dgx1-v100-8gpu-2nic.txt"      # tabs, NICs named mlx5_# directly, no GPU NUMA ID
H100 = TOPO / "h100-4gpu-8nic.txt"           # padded with spaces, NIC# + NIC legend
H200 = TOPO / "hgx-h200-8gpu-12nic.txt"      # tabs, NIC# + legend, empty field before GPU NUMA ID


def parse(path: Path) -> HostGpus:
    return parse_topo_matrix(path.read_text(), host="worker0", source=path.name)


def test_every_fixture_is_a_full_symmetric_matrix():
    for path in sorted(TOPO.glob("*.txt")):
        gpus = parse(path)
        devices = gpus.devices()
        assert sorted(gpus.links) == sorted(devices), path.name
        for a in devices:
            assert sorted(gpus.links[a]) == sorted(devices), (path.name, a)
            assert gpus.links[a][a] == "X"
            for b in devices:
                assert gpus.links[a][b] == gpus.links[b][a], (path.name, a, b)


def test_dgx1_tab_separated_with_mlx5_columns():
    gpus = parse(DGX1)
    assert gpus.source == "nvidia-smi" and gpus.host == "worker0"
    assert [g.index for g in gpus.gpus] == list(range(8))
    assert gpus.nics == ["mlx5_0", "mlx5_1"]
    links = gpus.links
    assert links["GPU0"]["GPU1"] == "NV1"
    assert links["GPU0"]["GPU2"] == "NV2"
    assert links["GPU0"]["GPU3"] == "NV1"
    assert links["GPU0"]["GPU4"] == "SYS"
    assert links["GPU4"]["GPU4"] == "X"  # "X " with a trailing space in the capture
    assert links["GPU4"]["GPU7"] == "NV1"
    assert links["GPU2"]["mlx5_0"] == "PIX"
    assert links["GPU0"]["mlx5_0"] == "NODE"
    assert links["GPU4"]["mlx5_0"] == "SYS"
    assert links["mlx5_1"]["GPU6"] == "PIX"
    assert links["mlx5_0"]["mlx5_1"] == "SYS"
    assert gpus.gpus[0].cpu_affinity == "0-23,48-71" and gpus.gpus[0].numa_node == 0
    assert gpus.gpus[7].cpu_affinity == "24-47,72-95" and gpus.gpus[7].numa_node == 1
    assert gpus.gpus[3].name is None and gpus.gpus[3].memory_total_mib is None  # not in topo text


def test_h100_space_separated_with_nic_legend():
    gpus = parse(H100)
    assert len(gpus.gpus) == 4
    assert gpus.nics == ["mlx5_%d" % i for i in range(8)]
    assert "NIC0" not in gpus.links and "NIC0" not in gpus.links["GPU0"]
    assert gpus.links["GPU0"]["GPU3"] == "NV18"
    assert gpus.links["GPU2"]["GPU1"] == "NV18"
    assert gpus.links["GPU3"]["mlx5_7"] == "PHB"
    assert gpus.links["mlx5_2"]["mlx5_5"] == "PHB"
    assert all(g.cpu_affinity == "0-79" and g.numa_node == 0 for g in gpus.gpus)


def test_h200_tabs_nic_legend_and_gpu_numa_id_column():
    gpus = parse(H200)
    assert len(gpus.gpus) == 8
    assert gpus.nics == ["mlx5_%d" % i for i in range(12)]
    links = gpus.links
    assert links["GPU0"]["GPU7"] == "NV18"
    assert links["GPU0"]["mlx5_0"] == "PXB"
    assert links["GPU1"]["mlx5_3"] == "PXB"
    assert links["GPU1"]["mlx5_0"] == "NODE"
    assert links["GPU4"]["mlx5_0"] == "SYS"
    assert links["GPU7"]["mlx5_11"] == "PXB"
    assert links["mlx5_1"]["mlx5_2"] == "PIX"
    assert links["mlx5_7"]["mlx5_8"] == "PIX"
    assert links["mlx5_10"]["mlx5_11"] == "NODE"
    assert links["mlx5_11"]["mlx5_11"] == "X"
    # The empty tab field before "GPU NUMA ID" must not shift the affinity columns.
    assert [g.cpu_affinity for g in gpus.gpus] == ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4
    assert [g.numa_node for g in gpus.gpus] == [0] * 4 + [1] * 4


def test_old_soc_legend_reads_as_sys():
    old = DGX1.read_text().replace("SYS", "SOC")
    old = old.replace("SOC  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes",
                      "SOC  = Connection traversing PCIe as well as the SMP link between CPU sockets")
    gpus = parse_topo_matrix(old)
    assert gpus.links["GPU0"]["GPU4"] == "SYS"
    assert gpus.links == parse(DGX1).links


def test_matrix_without_affinity_columns():
    text = "\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n"
    gpus = parse_topo_matrix(text)
    assert gpus.links["GPU1"]["GPU0"] == "PHB" and gpus.nics == []
    assert gpus.gpus[1].cpu_affinity is None and gpus.gpus[1].numa_node is None


def test_format_reads_back_the_same():
    for path in sorted(TOPO.glob("*.txt")):
        gpus = parse(path)
        text = format_topo_matrix(gpus)
        assert parse_topo_matrix(text, host="worker0").to_dict() == gpus.to_dict(), path.name
    assert "GPU0     X    NV1   NV2" in format_topo_matrix(parse(DGX1)).splitlines()[1]


def test_format_cpu_only_host():
    assert format_topo_matrix(HostGpus(host="cpu1")) == "cpu1: no GPU (source: none)\n"


def test_json_round_trip():
    gpus = parse(H200)
    again = HostGpus.from_json(gpus.to_json())
    assert again == gpus
    assert again.to_dict()["links"]["GPU2"]["mlx5_4"] == "PXB"


@pytest.mark.parametrize("text, expected", [
    ("", "empty"),
    ("\tGPU0\n", "line 1: a header line but no matrix rows"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU1\tNV1\t X \tjunk\tmore\n", "line 3: row GPU1 has 2 values"),
    ("\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tFOO\t X \n", "line 2: 'FOO' in row GPU0, column GPU1"),
    ("\tGPU0\tGPU1\nGPU0\t X \nGPU1\tPHB\t X \n", "line 2: row GPU0 has 1 link cells"),
    ("\tGPU0\tGPU2\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n", "line 1: header columns GPU0 GPU2"),
    ("\tGPU0\tGPU0\nGPU0\t X \tPHB\nGPU0\tPHB\t X \n", "line 3: device GPU0 appears twice"),
    ("\tGPU0\tGPU1\nGPU0\tPHB\tPHB\nGPU1\tPHB\t X \n", "line 2: row GPU0, column GPU0 is 'PHB'"),
    ("\tGPU0\tCPU Affinity\nGPU0\t X \tall\n", "line 2: CPU affinity 'all' of GPU0"),
    ("\tGPUx\nGPUx\t X \n", "line 2: GPU row name 'GPUx'"),
])
def test_malformed_text_names_line_and_text(text, expected):
    with pytest.raises(MlpMagicError) as info:
        parse_topo_matrix(text, source="saved.txt")
    message = str(info.value)
    assert message.startswith("saved.txt")
    assert expected in message
    assert "\n" not in message


def test_nic_legend_giving_one_name_twice_is_an_error():
    text = H100.read_text().replace("NIC1: mlx5_1", "NIC1: mlx5_0")
    with pytest.raises(MlpMagicError, match="gives the name 'mlx5_0' to two devices"):
        parse_topo_matrix(text)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_raises_only_mlp_magic_error(text):
    try:
        parse_topo_matrix(text)
    except MlpMagicError:
        pass


FIXTURE_TEXTS = [p.read_text() for p in sorted(TOPO.glob("*.txt"))]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FIXTURE_TEXTS), st.integers(0, 3000), st.integers(0, 40),
       st.text(alphabet=st.sampled_from(list("\t \nXNVSYPIHBODE0123456789,-:GUmlx_")), max_size=12))
def test_damaged_fixtures_raise_only_mlp_magic_error(text, at, cut, insert):
    at = at % (len(text) + 1)
    damaged = text[:at] + insert + text[at + cut:]
    try:
        gpus = parse_topo_matrix(damaged)
    except MlpMagicError:
        return
    for a, row in gpus.links.items():  # whatever parses is still a well-formed matrix
        assert row[a] == "X"


QUERY = (
    "0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559, 4, 0\n"
    "1, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, 81559, 70123, 97\n"
    "2, NVIDIA H100 80GB HBM3, 00000000:3A:00.0, 81559, [N/A], [Not Supported]\n"
)


def test_query_gpu_csv():
    gpus = parse_query_gpu(QUERY)
    assert [g.index for g in gpus] == [0, 1, 2]
    assert gpus[1].name == "NVIDIA H100 80GB HBM3"
    assert gpus[1].pci_bus_id == "0000:2a:00.0"
    assert (gpus[1].memory_total_mib, gpus[1].memory_used_mib, gpus[1].utilization_pct) == (81559, 70123, 97)
    assert gpus[2].memory_used_mib is None and gpus[2].utilization_pct is None


@pytest.mark.parametrize("text, expected", [
    ("0, H100, 00000000:18:00.0, 81559\n", "line 1: expected 6 comma-separated fields"),
    ("\n0, H100, 00000000:18:00.0, lots, 1, 2\n", "line 2: memory.total 'lots' is not a number"),
    ("x, H100, 00000000:18:00.0, 1, 1, 2\n", "line 1: GPU index 'x'"),
])
def test_query_gpu_errors(text, expected):
    with pytest.raises(MlpMagicError, match=expected):
        parse_query_gpu(text)


def test_merge_query_fills_the_topo_gpus():
    gpus = merge_query(parse(H100), parse_query_gpu(QUERY))
    assert gpus.gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert gpus.gpus[1].memory_used_mib == 70123
    assert gpus.gpus[3].name is None  # no query line for GPU3
    assert gpus.gpus[1].cpu_affinity == "0-79"  # topo fields kept
