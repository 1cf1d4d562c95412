"""nvidia-smi's default table, the one people paste into bug reports, read into values (pure).

What a hung multi-GPU job looks like is best known from those pastes: one GPU at 100% and
152 W, the others idle. ``parse_smi_tables(text)`` reads every table in a text (a terminal
capture with its prompt, a Markdown fence, ``nvidia-smi -l`` output with one table per second,
an excerpt that starts mid-table), in both layouts (drivers before 520: 31/22/22-wide cells;
later: 41/24/22), tab-indented or not. Each GPU record is two lines (a third, "MIG M.", where
the driver prints one):

    |   0  NVIDIA H100 80GB HBM3          On  |   00000000:04:00.0 Off |                    0 |
    | N/A   38C    P0            152W /  700W |   75370MiB /  81559MiB |    100%      Default |

and the processes table, when present, one row per process. Lines outside the tables (a
prompt, the date, prose) are skipped; a line of the table that cannot be read is one
``MlpMagicError`` naming its line number. ``format_smi_table`` writes a table back (the tests'
round trip). No I/O here: ``gpu/replay`` reads the files.
"""
from __future__ import annotations

import re

from mlp_magic.core.records import Record
from mlp_magic.errors import MlpMagicError

# What nvidia-smi prints where a value is unknown or cannot be read.
UNKNOWN = frozenset({"N/A", "[N/A]", "ERR!", "Unknown", "[Unknown]", "[Not Supported]"})
_NUMBER = r"[0-9]{1,15}"   # int() refuses more than 4300 digits: a longer run is no number of ours
_DECIMAL = rf"{_NUMBER}(?:\.[0-9]{{1,6}})?"
_GPU_HEAD = re.compile(rf"\s*({_NUMBER})\s+(\S.*?)\s+(On|Off|N/A)\s*")
_BUS = re.compile(r"\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s+(On|Off|N/A)\s*")
_SENSORS = re.compile(r"\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+?)\s*/\s*(\S+)\s*")
_MEMORY = re.compile(rf"\s*({_NUMBER})MiB\s*/\s*({_NUMBER})MiB\s*")
_UTIL = re.compile(r"\s*(\S+)\s+(\S.*?)\s*")
_VERSIONS = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)(?:\s+CUDA Version:\s+(\S+))?")
_PROCESS_TYPE = r"(C\+G|G\+C|M\+C|C|G|M)"
_PROCESS_NEW = re.compile(rf"\s*({_NUMBER})\s+(N/A|{_NUMBER})\s+(N/A|{_NUMBER})\s+({_NUMBER})\s+"
                          rf"{_PROCESS_TYPE}\s+(\S.*?)\s+(N/A|{_NUMBER}MiB)\s*")
_PROCESS_OLD = re.compile(rf"\s*({_NUMBER})\s+({_NUMBER})\s+{_PROCESS_TYPE}\s+(\S.*?)\s+"
                          rf"(N/A|{_NUMBER}MiB)\s*")
_NO_PROCESSES = re.compile(r"\s*No running processes found\s*")
_RULE = re.compile(r"\|[-+|]*")          # a rule under the header: |-----+-----+-----+ (or |)
_DOUBLE_RULE = re.compile(r"\|[=+|]*")   # the rule that opens the records: |=====+=====+=====|
_GPU_HEADERS = ("Persistence-M", "Pwr:Usage/Cap", "MIG M.", "Bus-Id")
_PROCESS_HEADERS = ("Process name", "GPU Memory", "Usage")


class SmiGpu(Record, frozen=True):
    """One GPU's record; None where the table says N/A (or ERR!)."""

    index: int
    name: str
    persistence: str | None     # "On" | "Off"
    bus_id: str                  # as printed: "00000000:04:00.0"
    display_active: str | None
    ecc_uncorrected: int | None  # "Volatile Uncorr. ECC"
    fan_pct: int | None
    temp_c: int | None
    perf: str | None             # "P0"
    power_w: float | None
    power_cap_w: float | None
    memory_used_mib: int
    memory_total_mib: int
    util_pct: int | None
    compute_mode: str
    mig_mode: str | None = None  # the third line ("Disabled"), where the driver prints it


class SmiProcess(Record, frozen=True):
    """One row of the processes table (GI and CI: MIG instances, None before driver 450)."""

    gpu: int
    pid: int
    type: str                    # "C" compute, "G" graphics, "C+G", "M" (MPS)...
    name: str
    used_mib: int | None
    gi: int | None = None
    ci: int | None = None


class SmiTable(Record, frozen=True):
    """One table: what one run of ``nvidia-smi`` printed (or the part of it that was pasted)."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: tuple = ()
    processes: tuple = ()


def _fail(number: int, what: str) -> MlpMagicError:
    return MlpMagicError(f"nvidia-smi table, line {number}: {what}")


def _value(token: str, unit: str, convert, number: int, what: str):
    """``"38C"`` -> 38 (``unit`` "C"); None for N/A and its kin."""
    if token in UNKNOWN:
        return None
    pattern = _DECIMAL if convert is float else _NUMBER
    if not re.fullmatch(pattern + re.escape(unit), token):
        raise _fail(number, f"{what} {token[:20]!r} is not a number of {unit or 'units'} or N/A")
    return convert(token[: len(token) - len(unit)] if unit else token)


def _state(token: str):
    return None if token in UNKNOWN else token


def _cells(line: str, count: int, number: int) -> list:
    """The cells between the bars of a table line, which must have ``count`` of them."""
    cells = line.split("|")[1:-1]
    if len(cells) != count or not line.endswith("|"):
        raise _fail(number, f"expected {count} cell{'s' if count > 1 else ''} between bars: {line[:60]!r}")
    return cells


def _match(pattern, cell: str, number: int, what: str):
    found = pattern.fullmatch(cell)
    if not found:
        raise _fail(number, f"cannot read the {what} from {cell.strip()[:40]!r}")
    return found.groups()


def _identity(cells: list, number: int) -> dict:
    """A record's first line: index, name, persistence | bus id, display | ECC."""
    index, name, persistence = _match(_GPU_HEAD, cells[0], number, "GPU index, name and persistence mode")
    bus_id, display = _match(_BUS, cells[1], number, "bus id and display state")
    return dict(index=int(index), name=name, persistence=_state(persistence), bus_id=bus_id,
                display_active=_state(display),
                ecc_uncorrected=_value(cells[2].strip(), "", int, number, "uncorrected ECC count"))


def _readings(cells: list, number: int) -> dict:
    """A record's second line: fan, temperature, perf state, power / cap | memory | util, mode."""
    fan, temp, perf, power, cap = _match(_SENSORS, cells[0], number, "fan, temperature, perf and power")
    used, total = _match(_MEMORY, cells[1], number, "memory usage")
    util, mode = _match(_UTIL, cells[2], number, "utilisation and compute mode")
    return dict(fan_pct=_value(fan, "%", int, number, "fan"),
                temp_c=_value(temp, "C", int, number, "temperature"),
                perf=_state(perf), power_w=_value(power, "W", float, number, "power"),
                power_cap_w=_value(cap, "W", float, number, "power cap"), memory_used_mib=int(used),
                memory_total_mib=int(total), util_pct=_value(util, "%", int, number, "utilisation"),
                compute_mode=mode)


def _process(line: str, layout: str | None, number: int) -> SmiProcess | None:
    cell = _cells(line, 1, number)[0]
    if _NO_PROCESSES.fullmatch(cell):
        return None
    new = _PROCESS_NEW.fullmatch(cell) if layout in (None, "new") else None
    if new:
        gpu, gi, ci, pid, kind, name, used = new.groups()
        return SmiProcess(int(gpu), int(pid), kind, name, _value(used, "MiB", int, number, "memory"),
                          None if gi == "N/A" else int(gi), None if ci == "N/A" else int(ci))
    gpu, pid, kind, name, used = _match(_PROCESS_OLD, cell, number, "process (GPU, pid, type, name, memory)")
    return SmiProcess(int(gpu), int(pid), kind, name, _value(used, "MiB", int, number, "memory"))


class _Reader:
    """The state of one pass over the text: the table being read, and where in it we are."""

    def __init__(self):
        self.tables: list = []
        self.versions: tuple = (None, None)
        self.gpus: list = []
        self.processes: list = []
        self.section = "outside"       # "outside" | "gpus" | "processes"
        self.expect = "gpus"           # which section the next "|===" line opens
        self.layout: str | None = None  # the processes table's: "new" (GI, CI) | "old"
        self.record: dict | None = None
        self.lines = 0                 # lines of the record read (1: identity only)
        self.record_line = 0

    def finish_table(self) -> None:
        if self.gpus or self.processes:
            self.tables.append(SmiTable(*self.versions, tuple(self.gpus), tuple(self.processes)))
        self.gpus, self.processes, self.versions, self.expect = [], [], (None, None), "gpus"

    def close_record(self, number: int) -> None:
        if self.record is not None:
            if self.lines < 2:
                raise _fail(self.record_line, f"GPU {self.record['index']}'s record is cut short "
                                              f"(its second line is missing at line {number})")
            if self.gpus and self.gpus[-1].index >= self.record["index"]:
                raise _fail(self.record_line, f"GPU {self.record['index']} after GPU {self.gpus[-1].index}")
            self.gpus.append(SmiGpu(**self.record))
        self.record, self.lines = None, 0

    def gpu_line(self, line: str, number: int) -> None:
        cells = _cells(line, 3, number)
        if self.record is not None and self.lines == 1:
            self.record.update(_readings(cells, number))
            self.lines = 2
        elif self.record is not None and self.lines == 2 and not cells[0].strip() and not cells[1].strip():
            self.record["mig_mode"] = _state(cells[2].strip()) if cells[2].strip() else None
            self.lines = 3
        else:
            self.close_record(number)
            self.record, self.lines, self.record_line = _identity(cells, number), 1, number

    def outside_line(self, line: str, number: int) -> None:
        """A line outside the records: a header, a rule, or a record where an excerpt begins.
        A header of a section the table already has begins the next table (``-l`` output)."""
        if "NVIDIA-SMI" in line:
            self.finish_table()
            found = _VERSIONS.search(line)
            self.versions = (found.group(2), found.group(3)) if found else (None, None)
        elif "Processes:" in line:
            if self.processes:
                self.finish_table()
            self.expect, self.layout = "processes", None
        elif any(header in line for header in _PROCESS_HEADERS) and self.expect == "processes":
            self.layout = "new" if re.search(r"\bGI\b", line) else self.layout or "old"
        elif any(header in line for header in _GPU_HEADERS) or _RULE.fullmatch(line):
            if "Persistence-M" in line and (self.gpus or self.processes):
                self.finish_table()
        elif _DOUBLE_RULE.fullmatch(line):
            if self.expect == "gpus" and (self.gpus or self.processes):
                self.finish_table()
            self.section = self.expect
        elif _GPU_HEAD.fullmatch(line.split("|")[1] if line.count("|") == 4 else ""):
            self.section = "gpus"      # an excerpt that starts at a GPU's record
            self.gpu_line(line, number)
        else:
            raise _fail(number, f"not a line of nvidia-smi's table: {line[:60]!r}")

    def line(self, raw: str, number: int) -> None:
        line = raw.strip()
        if self.section == "gpus":
            if line.startswith("|") and "Processes:" not in line:
                return self.gpu_line(line, number)
            self.close_record(number)
            if not line.startswith("+"):
                self.section = "outside"
                return self.line(raw, number)
        elif self.section == "processes":
            if line.startswith("|") and not (_RULE.fullmatch(line) or _DOUBLE_RULE.fullmatch(line)):
                found = _process(line, self.layout, number)
                self.processes += [found] if found else []
                return None
            self.section, self.expect = "outside", "gpus"
        elif line.startswith("|"):
            self.outside_line(line, number)
        return None


def parse_smi_tables(text: str) -> list:
    """Every nvidia-smi table in ``text``, in order: a list of ``SmiTable`` (at least one)."""
    reader = _Reader()
    lines = text.splitlines()
    for number, raw in enumerate(lines, 1):
        reader.line(raw, number)
    reader.close_record(len(lines) + 1)
    reader.finish_table()
    if not reader.tables:
        raise MlpMagicError("nvidia-smi table: no GPU record and no process found in the text")
    return reader.tables


def _shown(value, unit: str = "", digits: int = 0) -> str:
    if value is None:
        return "N/A"
    return (f"{value:.{digits}f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)) + unit


def _gpu_lines(gpu: SmiGpu) -> list:
    """A GPU's record in driver 550's widths (a wider value widens its line, as nvidia-smi's do)."""
    first = (f"|{gpu.index:>4}  {gpu.name:<29}{_shown(gpu.persistence):>4}  "
             f"|{gpu.bus_id:>19} {_shown(gpu.display_active):>3} |{_shown(gpu.ecc_uncorrected):>21} |")
    power = f"{_shown(gpu.power_w, 'W', 6):>4} / {_shown(gpu.power_cap_w, 'W', 6):>5}"
    sensors = f"{_shown(gpu.fan_pct, '%'):>3} {_shown(gpu.temp_c, 'C'):>5} {_shown(gpu.perf):>5}"
    second = (f"| {sensors} {power:>23} "
              f"|{gpu.memory_used_mib:>8}MiB / {gpu.memory_total_mib:>6}MiB "
              f"|{_shown(gpu.util_pct, '%'):>8} {gpu.compute_mode:>12} |")
    third = [f"|{'':41}|{'':24}|{gpu.mig_mode:>21} |"] if gpu.mig_mode is not None else []
    return [first, second] + third + ["+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"]


def _process_line(process: SmiProcess) -> str:
    gi, ci = _shown(process.gi), _shown(process.ci)
    return (f"| {process.gpu:>4}   {gi:>3}  {ci:>3}  {process.pid:>8}  {process.type:>5}   "
            f"{process.name:<37} {_shown(process.used_mib, 'MiB'):>9} |")


def format_smi_table(table: SmiTable) -> str:
    """The table as nvidia-smi (driver 550) lays it out; ``parse_smi_tables`` reads it back."""
    rule = "+" + "-" * 89 + "+"
    lines = [rule]
    if table.driver_version is not None:
        cuda = f"CUDA Version: {table.cuda_version}" if table.cuda_version is not None else ""
        driver = table.driver_version
        lines += [f"| NVIDIA-SMI {driver:<22} Driver Version: {driver:<14} {cuda:<23}|",
                  "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "|"]
    lines += ["| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
              "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
              "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"]
    for gpu in table.gpus:
        lines += _gpu_lines(gpu)
    lines += ["", rule, "| Processes:" + " " * 78 + "|",
              "|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |",
              "|" + "=" * 89 + "|"]
    lines += [_process_line(p) for p in table.processes] or ["|  No running processes found" + " " * 61 + "|"]
    return "\n".join(lines + [rule]) + "\n"
