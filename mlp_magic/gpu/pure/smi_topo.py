"""Parse (and print) the text of ``nvidia-smi topo -m`` and ``nvidia-smi --query-gpu``.

Pure: text in, ``HostGpus`` out. The captures in tests/fixtures/topo/ show the variants this
must read: cells separated by tabs or by padding spaces, a diagonal written "X" or " X ",
NIC columns named NIC# (real names in a "NIC Legend") or named mlx5_# directly, optional
"CPU Affinity" / "NUMA Affinity" / "GPU NUMA ID" columns (tab captures leave an empty field
in the GPU rows, and NIC rows leave them blank), and "SOC" from old drivers.
"""
from __future__ import annotations

import csv
import re
from collections.abc import Sequence

from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu.pure.model import GpuInfo, HostGpus, normalize_bus_id, normalize_link

DEFAULT_SOURCE = "nvidia-smi topo -m output"
CPU_AFFINITY = "CPU Affinity"
NUMA_AFFINITY = "NUMA Affinity"

_GPU_LABEL = re.compile(r"^GPU(\d{1,5})$")
_NIC_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_CPU_LIST = re.compile(r"^\d{1,6}(-\d{1,6})?(,\d{1,6}(-\d{1,6})?)*$")
_SMALL_INT = re.compile(r"^\d{1,6}$")
_COLUMN_GAP = re.compile(r"\t|\s{2,}")
_MISSING = ("", "N/A", "[N/A]", "[Not Supported]", "[Unknown Error]")

LINK_TYPES_HELP = "X, NV#, PIX, PXB, PHB, NODE, SYS or SOC"
MAX_TOPO_BYTES = 1 << 20   # the matrix of the largest machines is a few kB: more is another file


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _fail(source: str, lineno: int, what: str, line: str) -> MlpMagicError:
    """One line: where, what, and the line quoted short (a wrong file must not be repeated)."""
    return MlpMagicError("%s, line %d: %s: %r" % (source, lineno, _short(what, 160), _short(line, 80)))


def _split_cells(line: str) -> list[str]:
    """Cells of one matrix line: tab-separated fields (keeping empty ones) or space-separated words."""
    if "\t" in line:
        return [cell.strip() for cell in line.split("\t")]
    return line.split()


def _find_matrix(lines: Sequence[str], source: str) -> tuple[int, int]:
    """Index of the header line and one past the last matrix row."""
    header = next((i for i, line in enumerate(lines) if line.strip()), None)
    if header is None:
        raise MlpMagicError("%s: empty, no topology matrix found" % source)
    end = header + 1
    while end < len(lines) and lines[end].strip() and not lines[end].strip().startswith("Legend"):
        end += 1
    if end == header + 1:
        raise _fail(source, header + 1, "a header line but no matrix rows after it", lines[header])
    return header, end


def _header_columns(header: str, labels: list[str], source: str, lineno: int) -> list[str]:
    """Check the header names the row devices in order; return the extra column names after them."""
    words = list(re.finditer(r"\S+", header))
    named = [w.group() for w in words[:len(labels)]]
    if named != labels:
        raise _fail(source, lineno, "header columns %s do not match the row names %s"
                    % (" ".join(named) or "(none)", " ".join(labels)), header)
    tail = header[words[len(labels) - 1].end():]
    return [name.strip() for name in _COLUMN_GAP.split(tail) if name.strip()]


def _parse_row(line: str, lineno: int, devices: list[str], extra: list[str], source: str):
    """Link cells and the extra-column values of one matrix row."""
    cells = _split_cells(line)
    label, links, rest = cells[0], cells[1:1 + len(devices)], cells[1 + len(devices):]
    if len(links) < len(devices):
        raise _fail(source, lineno, "row %s has %d link cells, the header names %d devices"
                    % (label, len(links), len(devices)), line)
    row = {}
    for column, cell in zip(devices, links):
        link = normalize_link(cell)
        if link is None:
            raise _fail(source, lineno, "%r in row %s, column %s is not a link type (%s)"
                        % (cell, label, column, LINK_TYPES_HELP), line)
        if (link == "X") != (column == label):
            raise _fail(source, lineno, "row %s, column %s is %r: 'X' belongs on the diagonal only"
                        % (label, column, cell), line)
        row[column] = link
    # Tab captures leave empty fields (NIC rows, and one before "GPU NUMA ID"): values only.
    values = [value for value in rest if value]
    if len(values) > len(extra):
        raise _fail(source, lineno, "row %s has %d values after the links, the header names %d columns"
                    % (label, len(values), len(extra)), line)
    return row, dict(zip(extra, values))


def _gpu_from_row(label: str, values: dict[str, str], lineno: int, line: str, source: str) -> GpuInfo:
    index = int(_GPU_LABEL.match(label).group(1))
    cpus = values.get(CPU_AFFINITY, "N/A")
    if cpus not in _MISSING and not _CPU_LIST.match(cpus):
        raise _fail(source, lineno, "CPU affinity %r of %s is not a CPU list like 0-23,48-71"
                    % (cpus, label), line)
    numa = values.get(NUMA_AFFINITY, "N/A")
    return GpuInfo(
        index=index,
        cpu_affinity=None if cpus in _MISSING else cpus,
        # A GPU close to several nodes shows a list; only a single node is a usable NUMA id.
        numa_node=int(numa) if _SMALL_INT.match(numa) else None,
    )


def _nic_legend(lines: Sequence[str]) -> dict[str, str]:
    """NIC# -> real name, from the "NIC Legend:" section after the matrix."""
    names: dict[str, str] = {}
    in_legend = False
    for line in lines:
        if line.strip().startswith("NIC Legend"):
            in_legend = True
            continue
        match = _NIC_LEGEND_ENTRY.match(line) if in_legend else None
        if match:
            names[match.group(1)] = match.group(2)
    return names


def parse_topo_matrix(text: str, host: str = "localhost", source: str = DEFAULT_SOURCE) -> HostGpus:
    """Read ``nvidia-smi topo -m`` text into a HostGpus (source "nvidia-smi").

    ``source`` names the text (a file name) in error messages. Raises MlpMagicError naming
    the line number and the offending text for anything that is not such a matrix.
    """
    lines = [line.rstrip("\r") for line in text.split("\n")]
    header, end = _find_matrix(lines, source)
    labels = [_split_cells(lines[i])[0] for i in range(header + 1, end)]
    for i, label in enumerate(labels):
        if not label or labels.index(label) != i:
            what = "a matrix row must start with its device name" if not label else \
                "device %s appears twice" % label
            raise _fail(source, header + 2 + i, what, lines[header + 1 + i])
        if label.startswith("GPU") and not _GPU_LABEL.match(label):
            raise _fail(source, header + 2 + i, "GPU row name %r is not GPU<number>" % label,
                        lines[header + 1 + i])
    extra = _header_columns(lines[header], labels, source, header + 1)

    links: dict[str, dict[str, str]] = {}
    gpus: list[GpuInfo] = []
    for offset, label in enumerate(labels):
        lineno, line = header + 2 + offset, lines[header + 1 + offset]
        links[label], values = _parse_row(line, lineno, labels, extra, source)
        if _GPU_LABEL.match(label):
            gpus.append(_gpu_from_row(label, values, lineno, line, source))
    nics = [label for label in labels if not _GPU_LABEL.match(label)]
    return _rename_nics(HostGpus(host=host, source="nvidia-smi", gpus=gpus, nics=nics, links=links),
                        _nic_legend(lines[end:]), source)


def _rename_nics(gpus: HostGpus, names: dict[str, str], source: str) -> HostGpus:
    """Replace NIC# by the NIC legend's real names (mlx5_0...) everywhere."""
    if not names:
        return gpus
    rename = {nic: names.get(nic, nic) for nic in gpus.nics}
    new_names = list(rename.values())
    taken = [g.device for g in gpus.gpus] + new_names
    clash = next((n for n in new_names if taken.count(n) > 1), None)
    if clash is not None:
        raise MlpMagicError("%s: NIC legend gives the name %r to two devices" % (source, clash))
    gpus.nics = new_names
    gpus.links = {rename.get(a, a): {rename.get(b, b): t for b, t in row.items()}
                  for a, row in gpus.links.items()}
    return gpus


def format_topo_matrix(gpus: HostGpus) -> str:
    """The link matrix as nvidia-smi prints it (space-aligned), readable by parse_topo_matrix."""
    devices = gpus.devices()
    if not devices:
        return "%s: no GPU (%s)\n" % (gpus.host, gpus.error or "source: %s" % gpus.source)
    by_device = {g.device: g for g in gpus.gpus}
    show_affinity = any(g.cpu_affinity or g.numa_node is not None for g in gpus.gpus)
    header = [""] + devices + ([CPU_AFFINITY, NUMA_AFFINITY] if show_affinity else [])
    rows = [header]
    for a in devices:
        row = [a] + [gpus.link(a, b) or "?" for b in devices]
        gpu = by_device.get(a)
        if show_affinity and gpu is not None:
            row += [gpu.cpu_affinity or "N/A", "N/A" if gpu.numa_node is None else str(gpu.numa_node)]
        rows.append(row)
    rows = [[" X" if cell == "X" else cell for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows if i < len(row)) + 2 for i in range(len(header))]
    lines = ["".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines += ["", "Legend:", "",
              "  X    = Self",
              "  SYS  = PCIe + the SMP interconnect between NUMA nodes (e.g. QPI/UPI)",
              "  NODE = PCIe + the interconnect between PCIe host bridges within a NUMA node",
              "  PHB  = PCIe + a PCIe host bridge (typically the CPU)",
              "  PXB  = multiple PCIe bridges (not through the host bridge)",
              "  PIX  = at most a single PCIe bridge",
              "  NV#  = a bonded set of # NVLinks"]
    return "\n".join(lines) + "\n"


# Fields of `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`, in this order.
QUERY_GPU_FIELDS = ("index", "name", "pci.bus_id", "memory.total", "memory.used", "utilization.gpu")


def _optional_int(value: str, what: str, source: str, lineno: int, line: str) -> int | None:
    if value in _MISSING:
        return None
    try:
        return int(float(value))
    except (ValueError, OverflowError):
        raise _fail(source, lineno, "%s %r is not a number" % (what, value), line) from None


def parse_query_gpu(text: str, source: str = "nvidia-smi --query-gpu output") -> list[GpuInfo]:
    """GpuInfo per line of the CSV that QUERY_GPU_FIELDS asks for (no header, no units)."""
    gpus = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            fields = [f.strip() for f in next(csv.reader([line], skipinitialspace=True))]
        except csv.Error as exc:
            raise _fail(source, lineno, "not CSV (%s)" % exc, line) from None
        if len(fields) != len(QUERY_GPU_FIELDS):
            raise _fail(source, lineno, "expected %d comma-separated fields (%s)"
                        % (len(QUERY_GPU_FIELDS), ",".join(QUERY_GPU_FIELDS)), line)
        index, name, bus_id, total, used, util = fields
        if not _SMALL_INT.match(index):
            raise _fail(source, lineno, "GPU index %r is not a number" % index, line)
        gpus.append(GpuInfo(
            index=int(index),
            name=None if name in _MISSING else name,
            pci_bus_id=None if bus_id in _MISSING else normalize_bus_id(bus_id),
            memory_total_mib=_optional_int(total, "memory.total", source, lineno, line),
            memory_used_mib=_optional_int(used, "memory.used", source, lineno, line),
            utilization_pct=_optional_int(util, "utilization.gpu", source, lineno, line),
        ))
    return gpus


def merge_query(topo: HostGpus, queried: Sequence[GpuInfo]) -> HostGpus:
    """Fill name, bus id, memory and utilisation of the topo GPUs from --query-gpu (same index)."""
    by_index = {g.index: g for g in queried}
    for gpu in topo.gpus:
        extra = by_index.get(gpu.index)
        if extra is None:
            continue
        gpu.name, gpu.pci_bus_id = extra.name, extra.pci_bus_id
        gpu.memory_total_mib, gpu.memory_used_mib = extra.memory_total_mib, extra.memory_used_mib
        gpu.utilization_pct = extra.utilization_pct
    return topo
