"""GPU inventory and topology of a host: NVML, else `nvidia-smi topo -m`, else "no GPU".

``probe_local()`` answers for this machine; ``parse_topo_matrix()`` reads a saved matrix.
Both give a ``HostGpus`` whose ``links[a][b]`` is the link type between two devices.
"""
from __future__ import annotations

from .hints import far_nic_hint, host_hints, nearest_nic, numa_span_hint
from .model import GpuInfo, HostGpus, link_distance, normalize_bus_id, normalize_link
from .nvml_probe import probe_nvml
from .probe import probe_local
from .smi_topo import format_topo_matrix, parse_query_gpu, parse_topo_matrix

__all__ = [
    "GpuInfo", "HostGpus", "far_nic_hint", "format_topo_matrix", "host_hints", "link_distance",
    "nearest_nic", "normalize_bus_id", "normalize_link", "numa_span_hint", "parse_query_gpu",
    "parse_topo_matrix", "probe_local", "probe_nvml",
]
