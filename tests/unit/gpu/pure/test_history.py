"""The GPU history ring buffer against a plain list that keeps everything (hypothesis): wrap-around,
unknown values, clock steps, downsampling, CSV and JSON."""
from __future__ import annotations

import csv
import io
import json
import math
import sys

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mlp_magic.gpu.pure.history import CSV_HEADER, METRICS, GpuHistory, history_csv, history_json, iso_time
from mlp_magic.errors import MlpMagicError

from tests.unit.fuzz_checks import FUZZ, only_our_error
from tests.unit.hostile_json import dumps, hostile, replaced

# Readings as the sampler gives them: each None or in range (power in tenths of a watt).
READINGS = (st.none() | st.integers(0, 100), st.none() | st.integers(0, 2 ** 31 - 1),
            st.none() | st.integers(0, 120), st.none() | st.integers(0, 10 ** 6).map(lambda n: n / 10),
            st.none() | st.integers(0, 2 ** 40), st.none() | st.integers(0, 200),
            st.none() | st.integers(0, 2 ** 62))
ROW = st.tuples(*READINGS).map(list)


@st.composite
def histories(draw):
    """(gpus, length, [(t, rows)]) with times that mostly rise and sometimes step back."""
    gpus, length = draw(st.integers(0, 4)), draw(st.integers(1, 12))
    t, samples = draw(st.floats(0, 2e9)), []
    for _ in range(draw(st.integers(0, 30))):
        t += draw(st.sampled_from([1.0, 1.0, 0.5, 2.5, 0.0, -3.0]))
        samples.append((t, [draw(ROW) for _ in range(gpus)]))
    return gpus, length, samples


def filled(gpus: int, length: int, samples: list) -> GpuHistory:
    history = GpuHistory(gpus, length)
    for t, rows in samples:
        history.append(t, rows)
    return history


def model(samples: list, length: int) -> list:
    """What the buffer must hold: the last ``length`` samples, times never going back."""
    kept, last = [], None
    for t, rows in samples:
        last = t if last is None else max(t, last)
        kept.append((last, rows))
    return kept[-length:]


@FUZZ
@given(histories())
def test_the_buffer_keeps_the_last_samples_in_order(case):
    gpus, length, samples = case
    history = filled(gpus, length, samples)
    expected = model(samples, length)
    assert list(history.samples()) == expected
    assert len(history) == len(expected)
    assert history.latest() == (expected[-1] if expected else None)
    if expected:
        middle = expected[len(expected) // 2][0]
        assert list(history.samples(since=middle)) == [s for s in expected if s[0] >= middle]


@FUZZ
@given(histories())
def test_json_and_csv_hold_every_reading(case):
    gpus, length, samples = case
    history = filled(gpus, length, samples)
    again = GpuHistory.from_json(history.to_json())
    assert list(again.samples()) == list(history.samples()) and again.length == length
    rows = list(csv.reader(io.StringIO(history_csv({"w,1": history, "w0": history}))))
    assert ",".join(rows[0]) == CSV_HEADER
    assert len(rows) == 1 + 2 * len(history) * gpus
    for (t, readings), line in zip([s for s in history.samples() for _ in range(gpus)], rows[1:]):
        assert line[0] == iso_time(t) and line[1] == "w,1"
        assert line[3:] == ["" if v is None else str(v) for v in readings[int(line[2])]]


def reference_series(expected: list, gpus: int, metric: str, t0: float, step: float) -> list:
    column = METRICS.index(metric)
    newest = expected[-1][0]
    buckets = int((newest - t0) // step) + 1 if newest >= t0 else 0
    out = []
    for gpu in range(gpus):
        values = [[] for _ in range(buckets)]
        for t, rows in expected:
            if t >= t0 and rows[gpu][column] is not None:
                values[min(int((t - t0) // step), buckets - 1)].append(rows[gpu][column])
        out.append([_combined(metric, v) if v else None for v in values])
    return out


def _combined(metric: str, values: list):
    if metric == "throttle_bits":
        bits = 0
        for v in values:
            bits |= v
        return bits
    if metric in ("xid", "ecc_uncorrected"):
        return max(values)
    return round(sum(values) / len(values), 1)


@FUZZ
@given(histories(), st.sampled_from(METRICS), st.sampled_from([1.0, 2.0, 10.0, 0.5, 7.5]),
       st.integers(-3, 5))
def test_series_downsamples_like_the_plain_computation(case, metric, step, shift):
    gpus, length, samples = case
    history = filled(gpus, length, samples)
    expected = model(samples, length)
    t0, series = history.series(metric, step_s=step)
    if not expected:
        assert series == [[] for _ in range(gpus)]
        return
    assert t0 == expected[0][0]
    assert series == reference_series(expected, gpus, metric, t0, step)
    since = expected[0][0] + shift
    expected_series = reference_series(expected, gpus, metric, since, step)
    assert history.series(metric, since, step) == (since, expected_series)


def test_ten_minutes_wrap_around_and_sparklines_at_ten_seconds():
    history = GpuHistory(8)
    for second in range(1000):
        history.append(1000.0 + second, [[second % 100, 1000, 40, 152.3, 4, 0, 0]] * 8)
    assert len(history) == 600 and history.length == 600
    assert next(history.samples())[0] == 1400.0
    t0, series = history.series("util_pct", since=1400.0, step_s=10)
    assert t0 == 1400.0 and len(series) == 8 and len(series[0]) == 60
    assert series[0][:2] == [4.5, 14.5]   # seconds 400-409 read 0..9, 410-419 read 10..19
    assert history.latest()[1][0] == [99, 1000, 40, 152.3, 4, 0, 0]


def test_the_buffer_is_compact():
    history = GpuHistory(8, 600)
    held = sum(sys.getsizeof(a) for a in history._values.values()) + sys.getsizeof(history._times)
    assert held < 600 * 8 * 33 + 600 * 8 + 2000   # 32 bytes a GPU a second, 8 for each time


@pytest.mark.parametrize("reading, column", [
    (40000, 0), ("7", 0), (True, 0), (2.5, 0), (2 ** 31, 1), (math.nan, 3), (math.inf, 3),
    (1e39, 3), ("x", 3), (2 ** 64, 4), (-(2 ** 63), 6)])
def test_readings_the_buffer_cannot_hold_are_unknown(reading, column):
    history = GpuHistory(1, 2)
    row = [1, 2, 3, 4.0, 5, 6, 7]
    row[column] = reading
    history.append(1.0, [row])
    stored = history.latest()[1][0]
    assert stored[column] is None and stored[:column] + stored[column + 1:] == row[:column] + row[column + 1:]


def test_missing_gpus_and_readings_are_unknown_and_extra_ones_ignored():
    history = GpuHistory(2, 2)
    history.append(1.0, [[50, 1000, 3, 4.0, 5, 6, 7, "extra"]])
    assert history.latest()[1] == [[50, 1000, 3, 4.0, 5, 6, 7], [None] * 7]
    history.append(2.0, [[1], [2, 3], [9] * 7])
    assert history.latest()[1] == [[1] + [None] * 6, [2, 3] + [None] * 5]
    history.append(3.0, [None, (4.0,)])
    assert history.latest()[1] == [[None] * 7, [4] + [None] * 6]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        GpuHistory(1, 0)
    with pytest.raises(ValueError, match="unknown GPU metric"):
        GpuHistory(1).series("fan")
    with pytest.raises(ValueError, match="step_s"):
        GpuHistory(1).series("util_pct", step_s=0)


def test_every_host_in_one_export():
    a, b = GpuHistory(1, 3), GpuHistory(2, 3)
    a.append(0.0, [[1, 2, 3, 4.5, 0, 0, 0]])
    doc = history_json({"w1": b, "w0": a})
    assert list(doc["hosts"]) == ["w0", "w1"] and doc["metrics"] == list(METRICS)
    assert doc["hosts"]["w0"]["samples"] == [[0.0, [[1, 2, 3, 4.5, 0, 0, 0]]]]
    assert history_csv({"w0": a}) == CSV_HEADER + "\n1970-01-01T00:00:00.000+00:00,w0,0,1,2,3,4.5,0,0,0\n"


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                   max_size=4), max_leaves=20)


@FUZZ
@given(JSONISH | st.fixed_dictionaries({"gpus": st.integers(-2, 3), "samples": JSONISH}))
def test_a_bad_history_document_is_one_error(data):
    found, message = only_our_error(GpuHistory.from_json, data)
    assert message is None or message.startswith("bad GPU history")


def test_a_bad_history_document_is_refused():
    with pytest.raises(MlpMagicError, match="bad GPU history"):
        GpuHistory.from_json({"gpus": 1, "samples": [[1.0]]})


AGENTS_HISTORY = {"gpus": 2, "length": 600, "metrics": list(METRICS),
                  "samples": [[1767225600.0, [[50, 1000, 40, 100.0, 0, 0, 0],
                                              [60, 2000, 41, 110.0, 0, 0, 0]]],
                              [1767225601.0, [[55, 1000, 40, 101.5, 0, 0, 0], [None] * 7]]]}


@FUZZ
@given(hostile(AGENTS_HISTORY))
@example(replaced(AGENTS_HISTORY, ("gpus",), 2 ** 31))   # old code: MemoryError (10**6 GPUs: GBs)
@example(replaced(AGENTS_HISTORY, ("samples", 1, 0), 1e308))   # old code: OverflowError
@example(replaced(AGENTS_HISTORY, ("samples", 0, 0), float("inf")))   # old code: ValueError, int(NaN)
@example(replaced(AGENTS_HISTORY, ("samples", 0, 0), -0.0))   # 1.7e9 s to the next: 3.5e9 buckets, OOM
def test_an_agents_hostile_history_is_refused_or_exported_whole(data):
    """An agent's history as JSON reads it (Infinity, NaN, 2**31 GPUs): refused in one line, or
    a buffer whose series and exports (CSV, strict JSON) work."""
    history, message = only_our_error(GpuHistory.from_json, json.loads(dumps(data)))
    if history is not None:
        assert history.series("util_pct", step_s=0.5)[1] is not None
        json.dumps(history_json({"w0": history}), allow_nan=False)
        assert history_csv({"w0": history}).startswith(CSV_HEADER)


def test_an_agent_whose_clock_is_years_ahead_gives_a_bounded_series():
    """The server charts the last 10 minutes from its own clock; an agent's samples dated 50 years
    ahead once made that one series of 158 million buckets."""
    from mlp_magic.gpu.pure.history import MAX_BUCKETS

    history = GpuHistory(2)
    now = 1_795_968_000.0
    history.append(now, [[50, 1000, 40, 100.0, 0, 0, 0]] * 2)
    history.append(now + 50 * 365 * 86400, [[60, 2000, 41, 110.0, 0, 0, 0]] * 2)
    t0, series = history.series("util_pct", since=now - 600, step_s=10)
    assert t0 == now - 600 and [len(per_gpu) for per_gpu in series] == [MAX_BUCKETS, MAX_BUCKETS]
    assert series[0][60] == 50 and series[0][-1] == 60   # the later sample in the last bucket
