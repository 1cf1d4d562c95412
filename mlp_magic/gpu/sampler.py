"""Live NVML readings of this host's GPUs, once per tick: what the per-host agent streams.

``open_sampler()`` gives a ``GpuSampler`` on the driver (``pynvml``), or on the replay backend
when ``MLP_MAGIC_NVML_REPLAY`` names captures (``gpu/replay``). Then:
- ``static()``: {"source": "nvml" | "replay" | "none", "error": None | "no GPUs" | NVML's
  text, "driver", "gpus": [{"index", "name", "memory_total_mib", "power_limit_w",
  "pci_bus_id"}]}. No driver, no library, no GPU: "no GPUs", never an exception.
- ``sample()``: {"t": epoch seconds, "gpus": [[util_pct, mem_used_mib, temp_c, power_w,
  throttle_bits, xid, ecc_uncorrected], ...by index], "processes": [[gpu, rank, pid,
  used_mib], ...]}, each reading None where NVML does not support it. throttle_bits is the
  clocks event reasons mask (``nvmlDeviceGetCurrentClocksEventReasons``, the older
  ``...ThrottleReasons`` name on older bindings); xid is the last XID error seen (0: none);
  ecc_uncorrected the volatile uncorrected ECC total. A process's rank is read from its
  environment (``core/proc_ranks``); a pid whose /proc we cannot read has rank None (in a
  container with its own PID namespace, NVML's pids are the host's: they find no rank).
- ``wait_tick(seconds)``: waits out the tick on NVML's XID event set where the driver supports
  one, so an XID is seen as it happens, not polled; else it sleeps.

Recording (``python -m mlp_magic.gpu.sampler --record FILE --seconds N``) writes the JSON
lines that the replay reads: a session with a GPU captures real series for the tests
(tests/fixtures/nvml/h100-matmul-recorded.jsonl came from scripts/gpu_check on an H100).
"""
from __future__ import annotations

import json
import math
import os
import socket
import time

from mlp_magic import config
from mlp_magic.core.proc_ranks import parse_environ, rank_of
from mlp_magic.gpu.pure.model import normalize_bus_id
from mlp_magic.gpu.replay import RECORDING_FORMAT, RECORDING_VERSION, ReplayNvml, load_capture

MIB = 1024 * 1024
NO_GPUS = "no GPUs"
# A wait that ends this close to the tick's end ends the tick: another 1 ms wait would be a
# second tick for the replay, whose frames advance once per wait.
_CLOSE_ENOUGH = 0.002
# nvmlInit's failures that mean "this machine has no NVIDIA GPU to read", not a broken one.
_ABSENT = ("NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED")


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PidRanks:
    """pid -> rank, read once from ``/proc/PID/environ`` while the pid stays on a GPU."""

    def __init__(self, proc_root: str = "/proc"):
        self.proc_root = proc_root
        self._known: dict = {}

    def rank(self, pid: int):
        if pid not in self._known:
            try:
                with open(os.path.join(self.proc_root, str(pid), "environ"), "rb") as file:
                    info = rank_of(parse_environ(file.read()))
            except OSError:   # gone, or another user's process
                info = None
            self._known[pid] = None if info is None else info.rank
        return self._known[pid]

    def keep_only(self, pids) -> None:
        """Forget the pids no longer seen (a new process may reuse the number)."""
        self._known = {pid: rank for pid, rank in self._known.items() if pid in pids}


class GpuSampler:
    """This host's GPUs through a pynvml-like module (``None``: the real ``pynvml``)."""

    def __init__(self, nvml=None, source: str = "nvml", proc_root: str = "/proc", sleep=time.sleep,
                 clock=time.monotonic):
        self.source, self._sleep, self._clock = source, sleep, clock
        self.ranks = PidRanks(proc_root)
        self._xids: list = []
        self._handles: list = []
        self._events = None
        self._initialised = False
        self._static = {"source": "none", "error": NO_GPUS, "driver": None, "gpus": []}
        if nvml is None:
            try:
                import pynvml as nvml
            except ImportError:
                nvml = None
        self.nvml = nvml
        if nvml is not None:
            self._open()

    def _optional(self, name: str, *args):
        """An NVML call's answer; None where it fails ("not supported", a lost GPU, an old library)."""
        try:
            return getattr(self.nvml, name)(*args)
        except (self.nvml.NVMLError, AttributeError):
            return None

    def _open(self) -> None:
        nvml = self.nvml
        try:
            nvml.nvmlInit()
            self._initialised = True
        except OSError:
            return
        except nvml.NVMLError as error:
            absent = {getattr(nvml, name, None) for name in _ABSENT} - {None}
            if getattr(error, "value", None) not in absent:
                self._static["error"] = f"NVML: {error}"
            return
        try:
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        except nvml.NVMLError as error:
            self._static["error"] = f"NVML: {error}"
            return
        driver = self._optional("nvmlSystemGetDriverVersion")
        self._static = {"source": self.source, "error": None if self._handles else NO_GPUS,
                        "driver": None if driver is None else _text(driver),
                        "gpus": [self._facts(i, h) for i, h in enumerate(self._handles)]}
        self._xids = [0] * len(self._handles)
        self._events = self._xid_events()

    def _facts(self, index: int, handle) -> dict:
        name = self._optional("nvmlDeviceGetName", handle)
        memory = self._optional("nvmlDeviceGetMemoryInfo", handle)
        limit = self._optional("nvmlDeviceGetEnforcedPowerLimit", handle)
        pci = self._optional("nvmlDeviceGetPciInfo", handle)
        return {"index": index, "name": None if name is None else _text(name),
                "memory_total_mib": None if memory is None else memory.total // MIB,
                "power_limit_w": None if limit is None else round(limit / 1000, 1),
                "pci_bus_id": None if pci is None else normalize_bus_id(_text(pci.busId))}

    def _xid_events(self):
        """An event set with every GPU's XID errors registered, or None where NVML has none."""
        kind = getattr(self.nvml, "nvmlEventTypeXidCriticalError", None)
        events = self._optional("nvmlEventSetCreate") if kind is not None else None
        if events is None:
            return None
        registered = 0
        for handle in self._handles:
            try:
                self.nvml.nvmlDeviceRegisterEvents(handle, kind, events)
                registered += 1
            except (self.nvml.NVMLError, AttributeError):
                pass   # this GPU reports no XID events (NVML_ERROR_NOT_SUPPORTED)
        if not registered:
            self._optional("nvmlEventSetFree", events)
            return None
        return events

    def static(self) -> dict:
        """The GPUs' fixed facts and the sampler's state (a copy)."""
        return json.loads(json.dumps(self._static))

    def _readings(self, index: int, handle) -> list:
        nvml = self.nvml
        rates = self._optional("nvmlDeviceGetUtilizationRates", handle)
        memory = self._optional("nvmlDeviceGetMemoryInfo", handle)
        temp = self._optional("nvmlDeviceGetTemperature", handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
        power = self._optional("nvmlDeviceGetPowerUsage", handle)
        reasons = self._optional("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if reasons is None:
            reasons = self._optional("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        ecc = self._optional("nvmlDeviceGetTotalEccErrors", handle,
                             getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                             getattr(nvml, "NVML_VOLATILE_ECC", 0))
        return [None if rates is None else rates.gpu, None if memory is None else memory.used // MIB,
                temp, None if power is None else round(power / 1000, 1), reasons, self._xids[index], ecc]

    def _processes(self, index: int, handle) -> list:
        found = self._optional("nvmlDeviceGetComputeRunningProcesses", handle) or []
        return [[index, self.ranks.rank(p.pid), p.pid,
                 None if p.usedGpuMemory is None else p.usedGpuMemory // MIB] for p in found]

    def sample(self) -> dict:
        """One reading of every GPU, and the compute processes with their ranks."""
        gpus, processes = [], []
        for index, handle in enumerate(self._handles):
            gpus.append(self._readings(index, handle))
            processes += self._processes(index, handle)
        self.ranks.keep_only({row[2] for row in processes})
        return {"t": time.time(), "gpus": gpus, "processes": processes}

    def _note_event(self, data) -> None:
        if data.eventType & getattr(self.nvml, "nvmlEventTypeXidCriticalError", 0):
            index = self._optional("nvmlDeviceGetIndex", data.device)
            if index is not None and 0 <= index < len(self._xids):
                self._xids[index] = int(data.eventData)

    def wait_tick(self, seconds: float) -> None:
        """Return when ``seconds`` are over, noting every XID that arrives meanwhile."""
        deadline = self._clock() + seconds
        while True:
            left = deadline - self._clock()
            if left <= _CLOSE_ENOUGH:
                return
            if self._events is None:
                self._sleep(left)
                return
            asked, before = math.ceil(left * 1000), self._clock()
            try:
                data = self.nvml.nvmlEventSetWait_v2(self._events, asked)
            except self.nvml.NVMLError as error:
                timeout = getattr(error, "value", None) == getattr(self.nvml, "NVML_ERROR_TIMEOUT", 10)
                if not timeout or self._clock() - before < asked / 2000:
                    self._events = None   # it refuses to wait, or does not wait: sleep from now on
                continue
            except AttributeError:
                self._events = None
                continue
            self._note_event(data)

    def close(self) -> None:
        if self._initialised:
            if self._events is not None:
                self._optional("nvmlEventSetFree", self._events)
            self._optional("nvmlShutdown")
            self._initialised, self._events, self._handles = False, None, []


def open_sampler(env=None, proc_root: str = "/proc") -> GpuSampler:
    """The driver's sampler, or the replay's when ``MLP_MAGIC_NVML_REPLAY`` names captures
    (a capture that cannot be read: one MlpMagicError)."""
    files = config.nvml_replay(env)
    if files:
        return GpuSampler(ReplayNvml(load_capture(files)), "replay", proc_root)
    return GpuSampler(None, "nvml", proc_root)


def record(sampler: GpuSampler, path: str, seconds: float, tick_s: float = 1.0) -> int:
    """Write a sample every ``tick_s`` for ``seconds`` (at least one) to ``path``, as the
    replay's JSON lines; the number of samples written."""
    header = {"format": RECORDING_FORMAT, "version": RECORDING_VERSION, "host": socket.gethostname(),
              "recorded_at": time.time(), "static": sampler.static()}
    count = max(1, int(seconds / tick_s + 0.5))
    with open(path, "w", encoding="utf-8") as file:
        file.write(json.dumps(header) + "\n")
        for number in range(count):
            if number:
                sampler.wait_tick(tick_s)
            sample = sampler.sample()
            sample["processes"] = [[gpu, pid, used] for gpu, _rank, pid, used in sample["processes"]]
            file.write(json.dumps(sample) + "\n")
            file.flush()
    return count


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m mlp_magic.gpu.sampler",
                                     description="Record this host's NVML readings for the replay backend.")
    parser.add_argument("--record", metavar="FILE", required=True, help="the JSON-lines file to write")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to record (default 60)")
    args = parser.parse_args(argv)
    sampler = open_sampler()
    static = sampler.static()
    if static["error"]:
        print(f"mlp_magic: nothing to record: {static['error']}")
        return 1
    count = record(sampler, args.record, args.seconds)
    sampler.close()
    print(f"{count} samples of {len(static['gpus'])} GPUs written to {args.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
