"""One host's GPU readings over the last minutes, one sample a second, in a ring buffer (pure).

A sample is the time and, per GPU, the seven readings the live panel shows (``METRICS``, each
None when unknown). The agent keeps one buffer for its host and sends it to a new subscriber;
the server keeps one per host to draw sparklines and to export (CSV, JSON). At 64 hosts x 8
GPUs x 600 s that is 2.5 million readings, so they live in typed ``array``s, one per metric
(32 bytes a GPU a second), never in lists of tuples of Python numbers (over 100). "Unknown" is stored as a
value the reading cannot take: the type's lowest integer, NaN for power.

Times are the sampler's wall clock (epoch seconds). One that steps back (NTP) is stored as the
previous sample's time, so the buffer stays in time order and ``series`` stays well defined.
"""
from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone

from mlp_magic.core.numbers import number
from mlp_magic.errors import MlpMagicError

METRICS = ("util_pct", "mem_used_mib", "temp_c", "power_w", "throttle_bits", "xid", "ecc_uncorrected")
CSV_HEADER = "time,host,gpu," + ",".join(METRICS)
DEFAULT_LENGTH = 600   # ten minutes at 1 Hz
# Per metric: the array type and its "unknown". Power is kept to 0.1 W (what the sampler reads).
_TYPECODES = {"util_pct": "h", "mem_used_mib": "i", "temp_c": "h", "power_w": "f",
              "throttle_bits": "q", "xid": "i", "ecc_uncorrected": "q"}
_RANGES = {code: (-(1 << bits - 1), (1 << bits - 1) - 1) for code, bits in (("h", 16), ("i", 32), ("q", 64))}
# How a bucket of ``series`` is summed up: a bitmask ORed, counters at their highest, gauges averaged.
_COMBINE = {"throttle_bits": "or", "xid": "max", "ecc_uncorrected": "max"}


# What a buffer read from an agent may ask for: 256 GPUs x an hour stays under 30 MB (a count
# from a message, unbounded, would be gigabytes or a MemoryError).
MAX_GPUS = 256
MAX_LENGTH = 3600
MAX_BUCKETS = 4 * MAX_LENGTH   # a series' buckets: as many as any chart draws
TIMES = (-62135596800.0, 253402300799.0)   # years 1 to 9999: what datetime (iso_time) can show


def sample_time(value) -> float | None:
    """A sample's time (epoch seconds) read from a message, or None: json also reads Infinity,
    NaN and 1e308, which no clock gives and which break the buckets and the exports' times."""
    value = number(value)
    return float(value) if value is not None and TIMES[0] <= value <= TIMES[1] else None


def reading(value):
    """One reading from a message: a finite number (kept as it came), else None (unknown)."""
    return number(value, 2 ** 53)


def reading_rows(rows, width: int = len(METRICS)) -> list | None:
    """Rows of readings (a sample's GPUs, its processes) as strict JSON can carry them: each row
    cut to ``width``, each value a finite number or None; None when they are not a list of at
    most MAX_GPUS lists."""
    if not isinstance(rows, list) or len(rows) > MAX_GPUS or not all(isinstance(r, list) for r in rows):
        return None
    return [[reading(value) for value in row[:width]] for row in rows]


def _to_slot(typecode: str, value):
    """The value as the array stores it; out of range, not a number or None: the "unknown" mark."""
    if typecode == "f":
        return float(value) if number(value, 3e38) is not None else math.nan
    low, high = _RANGES[typecode]
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and low < value <= high else low


def _from_slot(typecode: str, stored):
    if typecode == "f":
        return None if math.isnan(stored) else round(stored, 1)
    return None if stored == _RANGES[typecode][0] else stored


def iso_time(t: float) -> str:
    """Epoch seconds as the panel's ISO form: ``2026-11-25T10:00:00.123+00:00``."""
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


class GpuHistory:
    """The last ``length`` samples of a host with ``gpus`` GPUs (oldest dropped first)."""

    def __init__(self, gpus: int, length: int = DEFAULT_LENGTH):
        if gpus < 0 or length < 1:
            raise ValueError(f"GpuHistory needs gpus >= 0 and length >= 1, not {gpus} and {length}")
        self.gpus, self.length = gpus, length
        self._times = array("d", bytes(8 * length))
        self._values = {m: array(_TYPECODES[m], [_to_slot(_TYPECODES[m], None)]) * (length * gpus)
                        for m in METRICS}
        self._count = 0
        self._next = 0   # the slot the next sample goes to

    def __len__(self) -> int:
        return self._count

    def append(self, t: float, rows: Sequence) -> None:
        """Add a sample: ``rows[gpu]`` is that GPU's readings in ``METRICS`` order. Missing GPUs
        or readings are unknown; readings past the seventh and GPUs past ``gpus`` are ignored."""
        if self._count:
            t = max(float(t), self._times[(self._next - 1) % self.length])
        slot = self._next
        self._times[slot] = float(t)
        for gpu in range(self.gpus):
            row = rows[gpu] if gpu < len(rows) and rows[gpu] is not None else ()
            for column, metric in enumerate(METRICS):
                value = row[column] if column < len(row) else None
                self._values[metric][slot * self.gpus + gpu] = _to_slot(_TYPECODES[metric], value)
        self._next = (slot + 1) % self.length
        self._count = min(self._count + 1, self.length)

    def _slot(self, age_rank: int) -> int:
        """Where the sample ``age_rank`` places after the oldest one is stored."""
        return (self._next - self._count + age_rank) % self.length

    def _rows(self, slot: int) -> list:
        base = slot * self.gpus
        return [[_from_slot(_TYPECODES[m], self._values[m][base + gpu]) for m in METRICS]
                for gpu in range(self.gpus)]

    def samples(self, since: float | None = None) -> Iterator:
        """(t, rows) of every sample at or after ``since`` (all when None), oldest first."""
        for rank in range(self._count):
            slot = self._slot(rank)
            if since is None or self._times[slot] >= since:
                yield self._times[slot], self._rows(slot)

    def latest(self):
        """(t, rows) of the newest sample, or None when there is none."""
        if not self._count:
            return None
        slot = (self._next - 1) % self.length
        return self._times[slot], self._rows(slot)

    def series(self, metric: str, since: float | None = None, step_s: float = 1.0):
        """One metric, per GPU, in buckets of ``step_s`` seconds from ``t0`` (``since``, else
        the oldest sample) to the newest sample: (t0, [[value per bucket] per GPU]). A bucket is
        the mean of its known readings (0.1 precision; throttle bits ORed, XID and ECC at their
        highest); None when it holds none. At most ``MAX_BUCKETS``, the later samples in the last:
        an agent whose clock is years off (or a time of 0) must not make billions of buckets."""
        if metric not in METRICS:
            raise ValueError(f"unknown GPU metric {metric!r} (known: {', '.join(METRICS)})")
        if not step_s > 0:
            raise ValueError(f"step_s must be positive, not {step_s!r}")
        if not self._count:
            return since, [[] for _ in range(self.gpus)]
        t0 = self._times[self._slot(0)] if since is None else since
        newest = self._times[(self._next - 1) % self.length]
        buckets = min(int((newest - t0) // step_s) + 1, MAX_BUCKETS) if newest >= t0 else 0
        gathered = [[[] for _ in range(buckets)] for _ in range(self.gpus)]
        values, typecode = self._values[metric], _TYPECODES[metric]
        for rank in range(self._count):
            slot = self._slot(rank)
            if self._times[slot] < t0:
                continue
            bucket = min(int((self._times[slot] - t0) // step_s), buckets - 1)
            for gpu in range(self.gpus):
                value = _from_slot(typecode, values[slot * self.gpus + gpu])
                if value is not None:
                    gathered[gpu][bucket].append(value)
        return t0, [[_combine(metric, bucket) for bucket in per_gpu] for per_gpu in gathered]

    def csv_lines(self, host: str) -> list:
        """One CSV line per sample and GPU, ``CSV_HEADER``'s columns (unknown: empty)."""
        lines = []
        for t, rows in self.samples():
            when = iso_time(t)
            for gpu, row in enumerate(rows):
                cells = ["" if v is None else str(v) for v in row]
                lines.append(",".join([when, _csv_text(host), str(gpu)] + cells))
        return lines

    def to_json(self) -> dict:
        """{"gpus", "length", "metrics", "samples": [[t, rows], ...]}: ``from_json`` reads it."""
        return {"gpus": self.gpus, "length": self.length, "metrics": list(METRICS),
                "samples": [[t, rows] for t, rows in self.samples()]}

    @classmethod
    def from_json(cls, data, length: int | None = None) -> GpuHistory:
        """A buffer from ``to_json``'s form (an agent's history); bad input: one MlpMagicError."""
        try:
            gpus, length = int(data["gpus"]), int(length or data.get("length") or DEFAULT_LENGTH)
            if not (0 <= gpus <= MAX_GPUS and 1 <= length <= MAX_LENGTH):
                raise ValueError(f"{gpus} GPUs, length {length}: at most {MAX_GPUS} and {MAX_LENGTH}")
            history = cls(gpus, length)
            if list(data.get("metrics", METRICS)) != list(METRICS):
                raise ValueError(f"metrics {data.get('metrics')!r}, expected {list(METRICS)}")
            for t, rows in data["samples"]:
                if sample_time(t) is None:
                    raise ValueError(f"sample time {t!r}")
                history.append(float(t), [list(row) for row in rows])
        except (KeyError, TypeError, ValueError, OverflowError) as error:
            raise MlpMagicError(f"bad GPU history: {type(error).__name__}: {error}"[:300]) from None
        return history


def _combine(metric: str, values: list):
    if not values:
        return None
    how = _COMBINE.get(metric)
    if how == "or":
        combined = 0
        for value in values:
            combined |= value
        return combined
    if how == "max":
        return max(values)
    return round(sum(values) / len(values), 1)


def _csv_text(text: str) -> str:
    """A CSV field: quoted when it holds a comma, a quote or a line break."""
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in ',"\r\n') else text


def history_csv(histories: Mapping) -> str:
    """Every host's buffer as one CSV text ({host: GpuHistory}), hosts in name order."""
    lines = [CSV_HEADER]
    for host in sorted(histories):
        lines += histories[host].csv_lines(host)
    return "\n".join(lines) + "\n"


def history_json(histories: Mapping) -> dict:
    """Every host's buffer: {"metrics": [...], "hosts": {host: GpuHistory.to_json()}}."""
    return {"metrics": list(METRICS),
            "hosts": {host: histories[host].to_json() for host in sorted(histories)}}
