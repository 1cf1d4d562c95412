"""GPU inventory and topology of a host: NVML, else `nvidia-smi topo -m`, else "no GPU".

``probe_local()`` answers for this machine; ``parse_topo_matrix()`` reads a saved matrix.
Both give a ``HostGpus`` whose ``links[a][b]`` is the link type between two devices.

The names below are loaded when first asked for (PEP 562): an engine that probes its host
(``gpu/probe.probe_on_engine``, a host chore the engine drops after it) imports the probe and
its model, not the hints, the nvidia-smi parsers or ``core/ranges``.
"""
from __future__ import annotations

import importlib

_HOMES = {
    "far_nic_hint": "pure.hints", "host_hints": "pure.hints", "nearest_nic": "pure.hints",
    "numa_span_hint": "pure.hints", "GpuInfo": "pure.model", "HostGpus": "pure.model",
    "link_distance": "pure.model", "normalize_bus_id": "pure.model", "normalize_link": "pure.model",
    "probe_nvml": "nvml_probe", "probe_local": "probe", "format_topo_matrix": "pure.smi_topo",
    "parse_query_gpu": "pure.smi_topo", "parse_topo_matrix": "pure.smi_topo",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted({*globals(), *_HOMES})
