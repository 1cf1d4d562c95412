"""Value types for one host's GPUs, NICs and the links between them.

Both probes (NVML and the ``nvidia-smi topo -m`` text) produce the same ``HostGpus``, so the
widget, the CLI and the hints never care where the data came from.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from mlp_magic.core.numbers import number
from mlp_magic.errors import MlpMagicError

SOURCES = ("nvml", "nvidia-smi", "none")

# Link types from nearest to farthest, as nvidia-smi's legend orders them. Drivers before
# ~2017 printed "SOC" (CPU socket) for what is now "SYS"; we store "SYS" only, so code that
# reads links never has to know about the old name.
LINK_ORDER = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")
_LINK_RE = re.compile(r"^(X|NV[1-9][0-9]*|PIX|PXB|PHB|NODE|SYS)$")


def normalize_link(cell: str) -> str | None:
    """The canonical link type for a matrix cell, or None when it is not one."""
    cell = cell.strip().upper()
    if cell == "SOC":  # old name of SYS
        return "SYS"
    return cell if _LINK_RE.match(cell) else None


def link_distance(link: str) -> int:
    """Position of a link type in LINK_ORDER (NV# counts as NV): smaller is closer."""
    return LINK_ORDER.index("NV" if link.startswith("NV") else link)


@dataclass
class GpuInfo:
    index: int
    name: str | None = None
    pci_bus_id: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    utilization_pct: int | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None  # CPU list as nvidia-smi prints it: "0-23,48-71"

    @property
    def device(self) -> str:
        """The name this GPU has in the link matrix."""
        return "GPU%d" % self.index


@dataclass
class HostGpus:
    host: str
    source: str = "none"
    gpus: list[GpuInfo] = field(default_factory=list)
    nics: list[str] = field(default_factory=list)
    # links[a][b] is the link type between devices a and b ("X" on the diagonal).
    links: dict[str, dict[str, str]] = field(default_factory=dict)
    error: str | None = None

    def devices(self) -> list[str]:
        return [g.device for g in self.gpus] + list(self.nics)

    def link(self, a: str, b: str) -> str | None:
        return self.links.get(a, {}).get(b)

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "source": self.source,
            "gpus": [asdict(g) for g in self.gpus],
            "nics": list(self.nics),
            "links": {a: dict(row) for a, row in self.links.items()},
            "error": self.error,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostGpus:
        try:
            error = data.get("error")
            if not isinstance(error, (str, type(None))) or not isinstance(data.get("nics", []), list):
                raise TypeError("error %.60r or nics %.60r" % (error, data.get("nics")))
            host = cls(
                host=str(data["host"]),
                source=str(data.get("source", "none")),
                gpus=[_gpu_info(g) for g in data.get("gpus", [])],
                nics=[str(n) for n in data.get("nics", [])],
                links={str(a): {str(b): _link(t) for b, t in row.items()}
                       for a, row in data.get("links", {}).items()},
                error=error or None,   # "": no error, as a probe that found none says
            )
        except (KeyError, TypeError, AttributeError, ValueError, RecursionError) as exc:
            raise MlpMagicError("bad GPU inventory JSON: %s: %s" % (type(exc).__name__, exc)) from None
        if host.source not in SOURCES:
            raise MlpMagicError("bad GPU inventory JSON: source %r is not one of %s"
                                % (host.source, ", ".join(SOURCES)))
        return host

    @classmethod
    def from_json(cls, text: str) -> HostGpus:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:   # RecursionError: nested too deeply
            raise MlpMagicError("bad GPU inventory JSON: %s" % exc) from None
        if not isinstance(data, dict):
            raise MlpMagicError("bad GPU inventory JSON: expected an object, got %s" % type(data).__name__)
        return cls.from_dict(data)


_MAX_NUMBER = 2 ** 53   # what JSON readers elsewhere (the panel's JavaScript) hold exactly
_GPU_TEXTS = ("name", "pci_bus_id", "cpu_affinity")


def _gpu_info(data: Any) -> GpuInfo:
    """A GPU read from JSON, checked: json also reads Infinity, NaN, huge ints and any type where
    a number is expected, which the faces' "%d", sums and sorts would choke on later."""
    if not isinstance(data, dict):
        raise TypeError("a GPU is not an object: %.60r" % (data,))
    gpu = GpuInfo(**data)
    for name in GpuInfo.__dataclass_fields__:
        value = getattr(gpu, name)
        if name == "index":   # "GPU%d", and the hints fold the indices as ranks
            ok = isinstance(value, int) and number(value, _MAX_NUMBER) is not None and value >= 0
        elif name in _GPU_TEXTS:
            ok = value is None or isinstance(value, str)
        else:   # readings, unknown or a finite number (a replay's may be a float)
            ok = value is None or number(value, _MAX_NUMBER) is not None
        if not ok:
            raise ValueError("GPU %s %.60r" % (name, value))
    return gpu


def _link(cell: Any) -> str:
    """A link type read from JSON; one the hints could not rank is refused."""
    link = normalize_link(cell) if isinstance(cell, str) else None
    if link is None:
        raise ValueError("link type %.60r" % (cell,))
    return link


def failed(host: str, error: str) -> HostGpus:
    """A host's inventory that could not be had, and why."""
    return HostGpus(host=host, source="none", error=error)


def parse_topo_answer(host: str, text: str) -> HostGpus:
    """``mlp-magic topo --json`` output ({"<its hostname>": {...}}) -> HostGpus named ``host``. Pure."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return failed(host, "bad JSON: %s (output starts %r)" % (exc, text[:60]))
    if not isinstance(data, dict) or len(data) != 1 or not isinstance(next(iter(data.values())), dict):
        return failed(host, "bad JSON: expected one host's object, got %.60r" % (data,))
    try:
        return HostGpus.from_dict(dict(next(iter(data.values())), host=host))
    except MlpMagicError as exc:
        return failed(host, "bad JSON: %s" % str(exc).replace("bad GPU inventory JSON: ", ""))


_BUS_ID_RE = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def normalize_bus_id(bus_id: str) -> str:
    """PCI address in the sysfs spelling ("0000:18:00.0").

    NVML and nvidia-smi print an 8-digit domain ("00000000:18:00.0"), sysfs and lspci a
    4-digit one; devices are matched across sources by this normalised form.
    """
    text = bus_id.strip()
    match = _BUS_ID_RE.match(text)
    if not match:
        return text.lower()
    domain, bus, dev, fn = match.groups()
    return "%04x:%02x:%02x.%s" % (int(domain, 16), int(bus, 16), int(dev, 16), fn)
