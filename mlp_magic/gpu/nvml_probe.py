"""GPU inventory and link matrix from NVML (``import pynvml``, the nvidia-ml-py package).

GPU-GPU links come from NVML: active NVLinks counted per peer ("NV#"), else the PCIe common
ancestor (PIX/PXB/PHB/NODE/SYS). NVML knows nothing of NICs, so GPU-NIC and NIC-NIC links
come from the PCI tree in sysfs (/sys/class/infiniband/<nic>/device), read the way
nvidia-smi reads it. Peers are matched by PCI bus id: NVML's index order is not CUDA's.
"""
from __future__ import annotations

import os
import re
import socket
import sys
from collections import Counter
from typing import Any
from collections.abc import Sequence

from mlp_magic.gpu.pure.model import GpuInfo, HostGpus, normalize_bus_id

MIB = 1024 * 1024
_CPU_MASK_WORDS = 16  # 1024 CPUs; NVML fills what the machine has and leaves the rest zero
_NODE_MASK_WORDS = 4

# nvmlDeviceGetTopologyCommonAncestor levels -> nvidia-smi's names. INTERNAL (two GPUs on
# one board, e.g. K80) crosses the board's own switch, so nvidia-smi shows it as PIX too.
_ANCESTOR_LINK = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def cpu_list(mask_words: Sequence[int], word_bits: int = 64) -> str:
    """'0-23,48-71' from an affinity bitmask given as 64-bit words, lowest CPUs first."""
    cpus = [w * word_bits + b for w, word in enumerate(mask_words)
            for b in range(word_bits) if int(word) >> b & 1]
    spans: list[list[int]] = []
    for cpu in cpus:
        if spans and cpu == spans[-1][1] + 1:
            spans[-1][1] = cpu
        else:
            spans.append([cpu, cpu])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in spans)


def pci_path(sysfs: str, device_link: str) -> tuple[str, ...]:
    """PCI hierarchy of a device: ("pci0000:17", "0000:17:01.0", ..., the device itself)."""
    parts = os.path.realpath(os.path.join(sysfs, device_link)).split(os.sep)
    for i in range(1, len(parts)):
        if parts[i - 1] == "devices" and parts[i].startswith("pci"):
            return tuple(parts[i:])
    return ()


def pci_link(path_a: Sequence[str], path_b: Sequence[str],
             numa_a: int | None, numa_b: int | None) -> str | None:
    """nvidia-smi's link type between two PCI devices from their sysfs paths.

    Different root complexes: NODE on one NUMA node, SYS across. Same root complex: PHB when
    only the host bridge is shared, PIX when both sit right under one switch (its downstream
    ports), PXB when more switch levels lie between them.
    """
    if not path_a or not path_b:
        return None
    if path_a[0] != path_b[0]:
        return "SYS" if None not in (numa_a, numa_b) and numa_a != numa_b else "NODE"
    common = 0
    while common < min(len(path_a), len(path_b)) and path_a[common] == path_b[common]:
        common += 1
    if common == 1:
        return "PHB"
    return "PIX" if max(len(path_a), len(path_b)) - common <= 2 else "PXB"


def _read_numa(sysfs: str, device_link: str) -> int | None:
    try:
        with open(os.path.join(sysfs, device_link, "numa_node")) as f:
            node = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None  # -1: the kernel does not know (single-node machines)


def _natural_key(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def infiniband_nics(sysfs: str = "/sys") -> list[tuple[str, tuple[str, ...], int | None]]:
    """(name, PCI path, NUMA node) of each RDMA device in sysfs, mlx5_2 before mlx5_10."""
    folder = os.path.join(sysfs, "class", "infiniband")
    try:
        names = sorted(os.listdir(folder), key=_natural_key)
    except OSError:
        return []
    nics = []
    for name in names:
        link = os.path.join("class", "infiniband", name, "device")
        nics.append((name, pci_path(sysfs, link), _read_numa(sysfs, link)))
    return nics


class _Nvml:
    """The NVML calls this module makes, each turning "not supported" into None."""

    def __init__(self, nvml: Any):
        self.nvml = nvml

    def optional(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self.nvml, name)(*args)
        except (self.nvml.NVMLError, AttributeError):
            return None

    def gpu_info(self, index: int, handle: Any, sysfs: str) -> GpuInfo:
        pci = self.optional("nvmlDeviceGetPciInfo", handle)
        bus_id = normalize_bus_id(_text(pci.busId)) if pci is not None else None
        memory = self.optional("nvmlDeviceGetMemoryInfo", handle)
        rates = self.optional("nvmlDeviceGetUtilizationRates", handle)
        cpus = self.optional("nvmlDeviceGetCpuAffinity", handle, _CPU_MASK_WORDS)
        name = self.optional("nvmlDeviceGetName", handle)
        return GpuInfo(
            index=index,
            name=_text(name) if name is not None else None,
            pci_bus_id=bus_id,
            memory_total_mib=memory.total // MIB if memory is not None else None,
            memory_used_mib=memory.used // MIB if memory is not None else None,
            utilization_pct=rates.gpu if rates is not None else None,
            numa_node=self.numa_node(handle, sysfs, bus_id),
            cpu_affinity=(cpu_list(list(cpus)) or None) if cpus is not None else None,
        )

    def numa_node(self, handle: Any, sysfs: str, bus_id: str | None) -> int | None:
        """The one NUMA node nearest the GPU (nvidia-smi's "NUMA Affinity"), else sysfs's."""
        scope = getattr(self.nvml, "NVML_AFFINITY_SCOPE_NODE", 0)
        mask = self.optional("nvmlDeviceGetMemoryAffinity", handle, _NODE_MASK_WORDS, scope)
        nodes = cpu_list(list(mask)) if mask is not None else ""
        if nodes.isdigit():
            return int(nodes)
        return _read_numa(sysfs, os.path.join("bus", "pci", "devices", bus_id)) if bus_id else None

    def nvlinks(self, handle: Any, gpu_bus_ids: Sequence[str]) -> tuple[Counter, int]:
        """Active NVLinks of one GPU: a count per peer GPU bus id, and links into NVSwitches."""
        direct: Counter = Counter()
        switch = 0
        enabled = getattr(self.nvml, "NVML_FEATURE_ENABLED", 1)
        for link in range(getattr(self.nvml, "NVML_NVLINK_MAX_LINKS", 18)):
            if self.optional("nvmlDeviceGetNvLinkState", handle, link) != enabled:
                continue  # inactive, or past the last link this GPU has
            remote = self.optional("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            if remote is None:
                continue
            bus_id = normalize_bus_id(_text(remote.busId))
            if bus_id in gpu_bus_ids:
                direct[bus_id] += 1
            elif self.remote_is_switch(handle, link):
                switch += 1
        return direct, switch

    def remote_is_switch(self, handle: Any, link: int) -> bool:
        kind = self.optional("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        # NVML without this call predates NVLink-to-CPU; a non-GPU peer there is an NVSwitch.
        return kind is None or kind == getattr(self.nvml, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)


def _gpu_pair_link(api: _Nvml, handles: Sequence[Any], gpus: Sequence[GpuInfo],
                   nvlinks: Sequence[tuple[Counter, int]], i: int, j: int) -> str | None:
    if i == j:
        return "X"
    direct, switch_i = nvlinks[i]
    count = direct.get(gpus[j].pci_bus_id, 0) if gpus[j].pci_bus_id else 0
    switch_j = nvlinks[j][1]
    if switch_i and switch_j:  # all GPUs on the NVSwitch fabric reach each other over it
        count += min(switch_i, switch_j)
    if count:
        return "NV%d" % count
    level = api.optional("nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
    return _ANCESTOR_LINK.get(level)


def _nic_links(gpus: Sequence[GpuInfo], nics: Sequence[tuple[str, tuple[str, ...], int | None]],
               links: dict[str, dict[str, str]], sysfs: str) -> None:
    """Add GPU-NIC and NIC-NIC links (and GPU pairs NVML could not place) from the PCI tree."""
    devices = [(g.device, pci_path(sysfs, os.path.join("bus", "pci", "devices", g.pci_bus_id))
                if g.pci_bus_id else (), g.numa_node) for g in gpus]
    devices += [(name, path, numa) for name, path, numa in nics]
    for a, path_a, numa_a in devices:
        row = links.setdefault(a, {})
        for b, path_b, numa_b in devices:
            if b in row:
                continue  # GPU-GPU links from NVML come first; the PCI tree fills the rest
            link = "X" if a == b else pci_link(path_a, path_b, numa_a, numa_b)
            if link is not None:
                row[b] = link


def _collect(nvml: Any, sysfs: str, host: str) -> HostGpus:
    api = _Nvml(nvml)
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    gpus = [api.gpu_info(i, h, sysfs) for i, h in enumerate(handles)]
    bus_ids = [g.pci_bus_id for g in gpus if g.pci_bus_id]
    nvlinks = [api.nvlinks(h, bus_ids) for h in handles]
    links: dict[str, dict[str, str]] = {}
    for i, gpu in enumerate(gpus):
        row = links.setdefault(gpu.device, {})
        for j, peer in enumerate(gpus):
            link = _gpu_pair_link(api, handles, gpus, nvlinks, i, j)
            if link is not None:  # unknown pairs stay absent rather than guessed
                row[peer.device] = link
    nics = infiniband_nics(sysfs)
    _nic_links(gpus, nics, links, sysfs)
    return HostGpus(host=host, source="nvml", gpus=gpus, nics=[n[0] for n in nics], links=links)


NVML_LIBRARY = "libnvidia-ml.so.1"   # the name pynvml loads on Linux, and nothing else there


def nvml_library_loads(name: str = NVML_LIBRARY) -> bool:
    """Whether the driver's NVML library can be loaded here (a GPU-less host: no, at once).
    Elsewhere than Linux pynvml looks in other places: True, let it try."""
    if not sys.platform.startswith("linux"):
        return True
    import ctypes

    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def probe_nvml(nvml: Any = None, *, sysfs: str = "/sys", host: str | None = None) -> HostGpus | None:
    """This machine's GPUs through NVML, or None where NVML is unavailable (no driver).

    ``nvml`` is the pynvml module (tests pass an object with the same calls).
    """
    if nvml is None:
        if not nvml_library_loads():
            return None   # pynvml would fail in nvmlInit: not imported for nothing (engines stay lean)
        try:
            import pynvml as nvml
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except (nvml.NVMLError, OSError):
        return None
    try:
        return _collect(nvml, sysfs, host or socket.gethostname())
    except nvml.NVMLError as exc:
        return HostGpus(host=host or socket.gethostname(), source="nvml", error="NVML: %s" % exc)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
