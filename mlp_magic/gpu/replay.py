"""A stand-in for the ``pynvml`` module that replays captured readings (tests and demos).

``ReplayNvml(load_capture(paths))`` answers the NVML calls the sampler makes (same names, same
``NVMLError`` with its ``value``, same constants) from real captures, one frame per tick:
- nvidia-smi's table as pasted in bug reports of hung jobs (``gpu/pure/smi_table``; the tests'
  fixtures are in tests/fixtures/nvml/), several tables in one file (``nvidia-smi -l``) or one
  file each;
- the sampler's own recordings (``python -m mlp_magic.gpu.sampler --record FILE``), JSON lines:
  a header ``{"format": "mlp_magic-nvml", "version": 1, "static": {...}}``, then one
  ``{"t", "gpus": [[util_pct, mem_used_mib, temp_c, power_w, throttle_bits, xid,
  ecc_uncorrected], ...], "processes": [[gpu, pid, used_mib], ...]}`` per second.
A tick is the wait on the XID event set (``nvmlEventSetWait_v2``): it sleeps its timeout, then
the next frame is served, and an XID that a recording's frame shows for the first time arrives
as an event, as the driver's would. After the last frame the first comes again. The GPUs are
those every frame has (the fewest), numbered from 0 in their order; names, bus ids, memory and
power limit come from the first frame. What a capture does not hold (a table has no throttle
reasons, N/A fields) is NVML_ERROR_NOT_SUPPORTED, as on a GPU that lacks the counter.
"""
from __future__ import annotations

import json
import math
import time
from types import SimpleNamespace

from mlp_magic.core.records import Record
from mlp_magic.machine.user_files import read_bytes
from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu.pure.smi_table import parse_smi_tables

RECORDING_FORMAT = "mlp_magic-nvml"
RECORDING_VERSION = 1
MIB = 1024 * 1024
# pynvml's values for what the sampler uses.
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_TIMEOUT = 10
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
nvmlEventTypeXidCriticalError = 0x8
_MESSAGES = {NVML_ERROR_UNINITIALIZED: "Uninitialized", NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
             NVML_ERROR_NOT_SUPPORTED: "Not Supported", NVML_ERROR_TIMEOUT: "Timeout"}


class NVMLError(Exception):
    """pynvml's error: ``value`` is NVML's return code."""

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML error {self.value}")


class Frame(Record, frozen=True):
    """One tick: per GPU the seven readings (None: not known), and [gpu, pid, used_mib] rows."""

    gpus: tuple
    processes: tuple = ()


class Capture(Record, frozen=True):
    """What a replay serves: the GPUs' fixed facts and the frames, in order."""

    static: tuple    # per GPU: {"index", "name", "memory_total_mib", "power_limit_w", "pci_bus_id"}
    frames: tuple
    driver: str | None = None


def _table_frame(table) -> tuple:
    """(static, Frame) of one nvidia-smi table; its GPUs renumbered from 0 in their order."""
    position = {gpu.index: n for n, gpu in enumerate(table.gpus)}
    static = tuple({"index": n, "name": gpu.name, "memory_total_mib": gpu.memory_total_mib,
                    "power_limit_w": gpu.power_cap_w, "pci_bus_id": gpu.bus_id}
                   for n, gpu in enumerate(table.gpus))
    rows = tuple((gpu.util_pct, gpu.memory_used_mib, gpu.temp_c, gpu.power_w, None, 0, gpu.ecc_uncorrected)
                 for gpu in table.gpus)
    processes = tuple((position[p.gpu], p.pid, p.used_mib) for p in table.processes
                      if p.gpu in position and "C" in p.type)
    return static, Frame(rows, processes)


def _number(value) -> bool:
    """A reading NVML could give: an int or float, finite, within what a counter holds."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and abs(value) < 2 ** 53)


def _reading_row(row) -> tuple:
    """A recorded GPU's seven readings, each a number or None (a short row: None for the rest)."""
    values = tuple(row[:7]) + (None,) * (7 - len(row[:7]))
    if not all(v is None or _number(v) for v in values):
        raise ValueError(f"readings must be numbers or null: {values!r}"[:120])
    return values


def _static_gpu(index: int, gpu) -> dict:
    """A recorded GPU's fixed facts, checked: the replay serves them as NVML would."""
    name, bus_id = gpu.get("name"), gpu.get("pci_bus_id")
    numbers = [gpu.get("memory_total_mib"), gpu.get("power_limit_w")]
    if not all(v is None or isinstance(v, str) for v in (name, bus_id)) or not all(
            v is None or _number(v) for v in numbers):
        raise ValueError(f"GPU {index}'s name, bus id, memory or power limit is of the wrong type")
    return {"index": index, "name": name, "memory_total_mib": numbers[0], "power_limit_w": numbers[1],
            "pci_bus_id": bus_id}


def _recording_frames(numbered: list, name: str) -> tuple:
    """(static, driver, frames) of a recording: its (line number, JSON text) pairs, header first;
    a line that cannot be read: one MlpMagicError naming it."""
    def fail(number: int, what: str, error: Exception) -> MlpMagicError:
        return MlpMagicError(f"{name}, line {number}: {what} ({type(error).__name__}: {error})"[:300])

    first, text = numbered[0]
    try:
        header = json.loads(text)
        static = tuple(_static_gpu(n, gpu) for n, gpu in enumerate(header["static"]["gpus"]))
        if header.get("format") != RECORDING_FORMAT or header.get("version") != RECORDING_VERSION:
            raise ValueError(f"expected format {RECORDING_FORMAT!r}, version {RECORDING_VERSION}")
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as error:
        raise fail(first, "not the header of a recording", error) from None
    frames = []
    for number, line in numbered[1:]:
        try:
            data = json.loads(line)
            rows = tuple(_reading_row(row) for row in data["gpus"])
            processes = tuple((int(g), int(pid), None if used is None else int(used))
                              for g, pid, used in data.get("processes", []))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as error:
            raise fail(number, "not a sample", error) from None
        frames.append(Frame(rows, processes))
    return static, header["static"].get("driver"), frames


MAX_CAPTURE_BYTES = 64 << 20   # an hour of 8 GPUs sampled each second is a few MiB


def _read(path: str) -> str:
    return read_bytes(path, "NVML replay", MAX_CAPTURE_BYTES).decode("utf-8", errors="replace")


def load_capture(paths) -> Capture:
    """The frames of every file in ``paths``, in order (a recording or nvidia-smi text each)."""
    statics, frames, driver = [], [], None
    for path in paths:
        text = _read(path)
        numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1)
                    if line.strip() and not line.startswith("#")]
        if numbered and numbered[0][1].lstrip().startswith("{"):
            static, driver_here, more = _recording_frames(numbered, path)
            statics += [static] * len(more)
            frames += more
        else:
            try:
                tables = parse_smi_tables(text)
            except MlpMagicError as error:
                raise MlpMagicError(f"{path}: {error}") from None
            driver_here = tables[0].driver_version
            for table in tables:
                static, frame = _table_frame(table)
                statics.append(static)
                frames.append(frame)
        driver = driver or driver_here
    if not frames:
        raise MlpMagicError(f"NVML replay: no sample in {', '.join(paths) or 'no file'}")
    count = min(min(len(f.gpus) for f in frames), min(len(s) for s in statics))
    frames = [Frame(f.gpus[:count], tuple(p for p in f.processes if p[0] < count)) for f in frames]
    return Capture(tuple(statics[0][:count]), tuple(frames), driver)


class _Handle(Record, frozen=True):
    index: int


class ReplayNvml:
    """The pynvml calls the GPU sampler makes, answered from a ``Capture``, frame by frame."""

    NVMLError = NVMLError
    NVML_ERROR_UNINITIALIZED = NVML_ERROR_UNINITIALIZED
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_TIMEOUT = NVML_ERROR_TIMEOUT
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = NVML_VOLATILE_ECC
    nvmlEventTypeXidCriticalError = nvmlEventTypeXidCriticalError

    def __init__(self, capture: Capture, sleep=time.sleep):
        self.capture, self._sleep = capture, sleep
        self.frame_number = 0
        self._started = False
        self._events: list = []       # XIDs that arrived and were not waited for yet

    # ------------------------------------------------------------- the library

    def nvmlInit(self) -> None:
        self._started = True

    def nvmlShutdown(self) -> None:
        self._started = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._known(self.capture.driver)

    def _frame(self) -> Frame:
        if not self._started:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        return self.capture.frames[self.frame_number % len(self.capture.frames)]

    @staticmethod
    def _known(value):
        if value is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return value

    def _reading(self, handle: _Handle, column: int):
        return self._known(self._frame().gpus[handle.index][column])

    # ------------------------------------------------------------- devices

    def nvmlDeviceGetCount(self) -> int:
        self._frame()
        return len(self.capture.static)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        if not 0 <= index < self.nvmlDeviceGetCount():
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    def nvmlDeviceGetIndex(self, handle: _Handle) -> int:
        return handle.index

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        return self._known(self.capture.static[handle.index]["name"])

    def nvmlDeviceGetPciInfo(self, handle: _Handle):
        return SimpleNamespace(busId=self._known(self.capture.static[handle.index]["pci_bus_id"]))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: _Handle) -> int:
        return int(round(self._known(self.capture.static[handle.index]["power_limit_w"]) * 1000))

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle):
        total = self._known(self.capture.static[handle.index]["memory_total_mib"]) * MIB
        used = self._reading(handle, 1) * MIB
        return SimpleNamespace(total=total, used=used, free=max(0, total - used))

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle):
        return SimpleNamespace(gpu=self._reading(handle, 0), memory=0)

    def nvmlDeviceGetTemperature(self, handle: _Handle, sensor: int) -> int:
        return self._reading(handle, 2)

    def nvmlDeviceGetPowerUsage(self, handle: _Handle) -> int:
        return int(round(self._reading(handle, 3) * 1000))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: _Handle) -> int:
        return self._reading(handle, 4)

    def nvmlDeviceGetTotalEccErrors(self, handle: _Handle, error_type: int, counter: int) -> int:
        return self._reading(handle, 6)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: _Handle) -> list:
        return [SimpleNamespace(pid=pid, usedGpuMemory=None if used is None else used * MIB)
                for gpu, pid, used in self._frame().processes if gpu == handle.index]

    # ------------------------------------------------------------- events: the tick

    def nvmlEventSetCreate(self):
        return SimpleNamespace(registered=set())

    def nvmlDeviceRegisterEvents(self, handle: _Handle, types: int, event_set) -> None:
        if types & nvmlEventTypeXidCriticalError:
            event_set.registered.add(handle.index)

    def nvmlEventSetFree(self, event_set) -> None:
        event_set.registered.clear()

    def nvmlEventSetWait_v2(self, event_set, timeout_ms: int):
        """An XID that arrived, else the tick: sleep, serve the next frame, and raise
        NVML_ERROR_TIMEOUT unless that frame brought an XID."""
        if not self._events:
            self._sleep(timeout_ms / 1000)
            before = self._frame()
            self.frame_number += 1
            after = self._frame()
            self._events = [(gpu, row[5]) for gpu, row in enumerate(after.gpus)
                            if row[5] and row[5] != before.gpus[gpu][5] and gpu in event_set.registered]
        if not self._events:
            raise NVMLError(NVML_ERROR_TIMEOUT)
        gpu, xid = self._events.pop(0)
        return SimpleNamespace(device=_Handle(gpu), eventType=nvmlEventTypeXidCriticalError,
                               eventData=xid, gpuInstanceId=0, computeInstanceId=0)
