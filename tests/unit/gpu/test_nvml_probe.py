"""The NVML probe against a fake `pynvml` that answers from the real topo captures.

This machine has no GPU, so NVML itself cannot run here. The fake answers each NVML call
the probe makes the way NVML would on the captured machine (NVLink per link with remote PCI
info, NVSwitch links on HGX boards, common PCIe ancestors, affinity bitmasks), and a sysfs
tree in tmp_path places the GPUs and NICs in a PCI hierarchy shaped like the capture. The
probe's answer must equal the parser's answer for the same capture.
"""
from __future__ import annotations

import ctypes.util
import itertools
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from mlp_magic.gpu.pure.model import HostGpus
from mlp_magic.gpu.nvml_probe import cpu_list, infiniband_nics, pci_link, probe_nvml
from mlp_magic.gpu.pure.smi_topo import parse_topo_matrix

TOPO = Path(__file__).resolve().parents[2] / "fixtures" / "topo"
MIB = 1024 * 1024
_ANCESTOR = {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}


class FakeNVMLError(Exception):
    def __init__(self, value: int):
        super().__init__("NVML error %d" % value)
        self.value = value


def _mask(cpus: str, words: int) -> list:
    bits = 0
    for span in cpus.split(","):
        first, _, last = span.partition("-")
        for cpu in range(int(first), int(last or first) + 1):
            bits |= 1 << cpu
    return [(bits >> (64 * w)) & (2 ** 64 - 1) for w in range(words)]


def _nvml_bus_id(bus_id: str) -> str:
    """NVML spells the domain with 8 digits and the bus in capitals."""
    return ("0000" + bus_id).upper()


class FakeNvml:
    """The pynvml calls probe_nvml makes, answered from one parsed capture (`truth`)."""

    NVMLError = FakeNVMLError
    NVML_FEATURE_ENABLED = 1
    NVML_AFFINITY_SCOPE_NODE = 0
    NVML_NVLINK_MAX_LINKS = 18
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
    NVML_ERROR_INVALID_ARGUMENT = 2

    def __init__(self, truth: HostGpus, bus_ids: dict, name: str = "Tesla V100-SXM2-32GB"):
        self.truth, self.bus_ids, self.name = truth, bus_ids, name
        self.calls = []
        self.nvlinks = self._wire_nvlinks()

    def _wire_nvlinks(self) -> dict:
        """Per GPU, (remote bus id, remote type) for each NVLink.

        Equal NV# between every pair means an NVSwitch board (HGX/DGX H100/H200): each GPU's
        links go to switches. Otherwise (DGX-1's hybrid cube mesh) links go straight to peers.
        """
        gpus = [g.device for g in self.truth.gpus]
        counts = {self.truth.links[a][b] for a in gpus for b in gpus if a != b}
        wires = {}
        if len(counts) == 1 and next(iter(counts)).startswith("NV"):
            n = int(next(iter(counts))[2:])
            for a in gpus:
                wires[a] = [(_nvml_bus_id("0000:%02x:00.0" % (0xe0 + link % 4)), 2) for link in range(n)]
            return wires
        for a in gpus:
            wires[a] = [(_nvml_bus_id(self.bus_ids[b]), 0) for b in gpus for _ in range(self._nvlinks(a, b))]
        return wires

    def _nvlinks(self, a: str, b: str) -> int:
        link = self.truth.links[a][b]
        return int(link[2:]) if link.startswith("NV") else 0

    def _gpu(self, handle):
        return self.truth.gpus[handle.index]

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self):
        return len(self.truth.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return SimpleNamespace(index=index)

    def nvmlDeviceGetName(self, handle):
        return self.name.encode()  # older pynvml returns bytes

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=_nvml_bus_id(self.bus_ids[self._gpu(handle).device]))

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=32768 * MIB, used=(100 + handle.index) * MIB, free=0)

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=10 * handle.index, memory=0)

    def nvmlDeviceGetCpuAffinity(self, handle, words):
        return _mask(self._gpu(handle).cpu_affinity, words)

    def nvmlDeviceGetMemoryAffinity(self, handle, words, scope):
        return _mask(str(self._gpu(handle).numa_node), words)

    def nvmlDeviceGetTopologyCommonAncestor(self, h1, h2):
        link = self.truth.links[self._gpu(h1).device][self._gpu(h2).device]
        if link.startswith("NV"):  # the PCIe path between NVLink peers is not in the capture
            same = self._gpu(h1).numa_node == self._gpu(h2).numa_node
            return _ANCESTOR["NODE" if same else "SYS"]
        return _ANCESTOR[link]

    def _wire(self, handle, link):
        wires = self.nvlinks[self._gpu(handle).device]
        if link >= len(wires) + 2:  # two spare inactive links, then "no such link"
            raise FakeNVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        return wires[link] if link < len(wires) else None

    def nvmlDeviceGetNvLinkState(self, handle, link):
        return 1 if self._wire(handle, link) else 0

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle, link):
        return SimpleNamespace(busId=self._wire(handle, link)[0])

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        return self._wire(handle, link)[1]


def make_sysfs(root: Path, groups) -> dict:
    """A /sys tree: each group (numa, kind, devices) under its own PCIe root complex.

    kind "PHB": each device on its own root port; "PIX": all under one switch; "PXB": one
    switch whose ports each lead to a second switch, one device behind each. Devices named
    mlx5_# get /sys/class/infiniband entries. Returns device name -> PCI bus id.
    """
    bus_of = {}
    for g, (numa, kind, devices) in enumerate(groups):
        base = 0x10 * (g + 1)
        numbers = itertools.count(base + 1)
        top = root / "devices" / ("pci0000:%02x" % base)

        def step(parent: Path) -> Path:
            child = parent / ("0000:%02x:00.0" % next(numbers))
            child.mkdir(parents=True)
            (child / "numa_node").write_text("%d\n" % numa)
            return child

        switch = step(step(top)) if kind != "PHB" else None
        for name in devices:
            if kind == "PHB":
                device = step(step(top))
            elif kind == "PIX":
                device = step(step(switch))
            else:
                device = step(step(step(step(switch))))
            bus_of[name] = device.name
            link = root / "bus" / "pci" / "devices" / device.name
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(device)
            if name.startswith("mlx5_"):
                ib = root / "class" / "infiniband" / name
                ib.mkdir(parents=True)
                (ib / "device").symlink_to(device)
    return bus_of


GPUS = ["GPU%d" % i for i in range(8)]
LAYOUTS = {
    "dgx1-v100-8gpu-2nic.txt": [
        (0, "PIX", ["GPU0", "GPU1"]), (0, "PIX", ["GPU2", "GPU3", "mlx5_0"]),
        (1, "PIX", ["GPU4", "GPU5"]), (1, "PIX", ["GPU6", "GPU7", "mlx5_1"])],
    "h100-4gpu-8nic.txt": [(0, "PHB", GPUS[:4] + ["mlx5_%d" % i for i in range(8)])],
    "hgx-h200-8gpu-12nic.txt": [
        (0, "PXB", ["GPU0", "mlx5_0"]), (0, "PIX", ["mlx5_1", "mlx5_2"]), (0, "PXB", ["GPU1", "mlx5_3"]),
        (0, "PXB", ["GPU2", "mlx5_4"]), (0, "PXB", ["GPU3", "mlx5_5"]),
        (1, "PXB", ["GPU4", "mlx5_6"]), (1, "PIX", ["mlx5_7", "mlx5_8"]), (1, "PXB", ["GPU5", "mlx5_9"]),
        (1, "PXB", ["GPU6", "mlx5_10"]), (1, "PXB", ["GPU7", "mlx5_11"])],
}


def truth_of(name: str) -> HostGpus:
    return parse_topo_matrix((TOPO / name).read_text(), host="worker0")


@pytest.mark.parametrize("fixture", sorted(LAYOUTS))
def test_nvml_probe_gives_what_the_parser_gives(fixture, tmp_path):
    truth = truth_of(fixture)
    bus_of = make_sysfs(tmp_path, LAYOUTS[fixture])
    nvml = FakeNvml(truth, bus_of)
    found = probe_nvml(nvml, sysfs=str(tmp_path), host="worker0")
    assert nvml.calls == ["init", "shutdown"]
    assert found.source == "nvml" and found.error is None
    assert found.nics == truth.nics
    gpu_names = [g.device for g in truth.gpus]
    for a in gpu_names:  # GPU-GPU from NVML: NVLink counts and common ancestors
        for b in gpu_names:
            assert found.links[a][b] == truth.links[a][b], (a, b)
    assert found.links == truth.links  # GPU-NIC and NIC-NIC from the PCI tree too
    for mine, real in zip(found.gpus, truth.gpus):
        assert (mine.cpu_affinity, mine.numa_node) == (real.cpu_affinity, real.numa_node)
        assert mine.pci_bus_id == bus_of[real.device]  # normalised from NVML's spelling
    assert found.gpus[2].name == "Tesla V100-SXM2-32GB"
    assert (found.gpus[2].memory_total_mib, found.gpus[2].memory_used_mib) == (32768, 102)
    assert found.gpus[3].utilization_pct == 30


def test_peers_are_matched_by_bus_id_not_by_index(tmp_path):
    """NVML index order need not follow bus order: give the GPUs reversed bus ids."""
    truth = truth_of("dgx1-v100-8gpu-2nic.txt")
    reversed_layout = [(numa, kind, [("GPU%d" % (7 - int(d[3:])) if d.startswith("GPU") else d)
                                     for d in devices])
                       for numa, kind, devices in LAYOUTS["dgx1-v100-8gpu-2nic.txt"]]
    bus_of = make_sysfs(tmp_path, reversed_layout)
    found = probe_nvml(FakeNvml(truth, bus_of), sysfs=str(tmp_path), host="worker0")
    assert found.gpus[0].pci_bus_id > found.gpus[7].pci_bus_id
    for a in GPUS:
        for b in GPUS:
            assert found.links[a][b] == truth.links[a][b], (a, b)


def test_without_sysfs_nics_the_gpu_matrix_stands_alone(tmp_path):
    truth = truth_of("hgx-h200-8gpu-12nic.txt")
    bus_of = {g.device: "0000:%02x:00.0" % (0x18 + g.index) for g in truth.gpus}
    found = probe_nvml(FakeNvml(truth, bus_of), sysfs=str(tmp_path / "empty"), host="worker0")
    assert found.nics == []
    assert found.links["GPU0"]["GPU5"] == "NV18"
    assert sorted(found.links) == GPUS and all(sorted(row) == GPUS for row in found.links.values())


def test_nvml_error_mid_probe_is_reported_not_raised(tmp_path):
    class Broken(FakeNvml):
        def nvmlDeviceGetCount(self):
            raise FakeNVMLError(999)

    found = probe_nvml(Broken(truth_of("h100-4gpu-8nic.txt"), {}), sysfs=str(tmp_path), host="w")
    assert found.source == "nvml" and found.gpus == [] and found.error == "NVML: NVML error 999"


def test_no_driver_means_none(tmp_path):
    class NoDriver(FakeNvml):
        def nvmlInit(self):
            raise FakeNVMLError(9)  # NVML_ERROR_DRIVER_NOT_LOADED

    assert probe_nvml(NoDriver(truth_of("h100-4gpu-8nic.txt"), {}), sysfs=str(tmp_path)) is None


def test_real_pynvml_on_this_machine():
    found = probe_nvml()
    if ctypes.util.find_library("nvidia-ml") is None and not os.path.exists("/dev/nvidiactl"):
        assert found is None  # no driver here: the CPU-only answer
    else:
        assert found is not None and found.source == "nvml"
        assert all(found.links[g.device][g.device] == "X" for g in found.gpus)


def test_cpu_list_folds_bitmask_words():
    words = _mask("0-23,48-71", 4)
    assert cpu_list(words) == "0-23,48-71"
    assert cpu_list(_mask("56-111,168-223", 4)) == "56-111,168-223"
    assert cpu_list([0b1010]) == "1,3"
    assert cpu_list([0, 0]) == ""


def test_pci_link_rules():
    root = ("pci0000:00",)
    switch = root + ("0000:00:01.0", "0000:01:00.0")
    assert pci_link(switch + ("0000:02:08.0", "0000:03:00.0"), switch + ("0000:02:10.0", "0000:04:00.0"),
                    0, 0) == "PIX"
    assert pci_link(root + ("0000:00:01.0", "0000:01:00.0"), root + ("0000:00:02.0", "0000:02:00.0"),
                    0, 0) == "PHB"
    deep = switch + ("0000:02:08.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0")
    assert pci_link(deep, switch + ("0000:02:10.0", "0000:06:00.0"), 0, 0) == "PXB"
    other_root = ("pci0000:80", "0000:80:01.0", "0000:81:00.0")
    assert pci_link(switch, other_root, 0, 0) == "NODE"
    assert pci_link(switch, other_root, 0, 1) == "SYS"
    assert pci_link(switch, other_root, None, 1) == "NODE"  # unknown node: do not claim SYS
    assert pci_link((), other_root, 0, 0) is None


def test_infiniband_nics_in_natural_order(tmp_path):
    make_sysfs(tmp_path, LAYOUTS["hgx-h200-8gpu-12nic.txt"])
    nics = infiniband_nics(str(tmp_path))
    assert [n[0] for n in nics] == ["mlx5_%d" % i for i in range(12)]
    assert nics[0][1][0] == "pci0000:10" and nics[0][2] == 0
    assert nics[11][2] == 1
    assert infiniband_nics(str(tmp_path / "nothing")) == []
