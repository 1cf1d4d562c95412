"""The replay backend: what it makes of captures (tables and recordings), how it answers NVML's
calls, and files it cannot read (one MlpMagicError naming the file and line, never another)."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu import replay
from mlp_magic.gpu.replay import Frame, NVMLError, ReplayNvml, load_capture

from tests.unit.fuzz_checks import FUZZ, JUNK, only_our_error

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvml"
HEADER = {"format": "mlp_magic-nvml", "version": 1,
          "static": {"gpus": [{"index": 0, "name": "G", "memory_total_mib": 10, "power_limit_w": 1.5,
                               "pci_bus_id": "0000:01:00.0"}]}}


def test_a_table_capture_becomes_frames_of_its_gpus():
    capture = load_capture([str(FIXTURES / "dcgm-83-a100-processes.txt")])
    assert [gpu["index"] for gpu in capture.static] == [0, 1]   # GPUs 6 and 7, renumbered
    rows = ((91, 36737, 70, 313.0, None, 0, 0), (100, 36737, 60, 339.0, None, 0, 0))
    assert capture.frames == (Frame(rows, ()),)   # its process ran on GPU 0, not in the excerpt


def test_processes_on_gpus_outside_the_capture_or_graphics_only_are_left_out(tmp_path):
    text = ("| Processes: |\n|  GPU GI CI PID Type Process name  Usage |\n|===|\n"
            "| 0 N/A N/A 11 C python 1MiB |\n| 0 N/A N/A 12 G Xorg 2MiB |\n| 5 N/A N/A 13 C python 3MiB |\n")
    path = tmp_path / "t.txt"
    path.write_text((FIXTURES / "gpu-burn-114-h100.txt").read_text() + "\n" + text)
    capture = load_capture([str(path)])
    assert capture.frames[0].processes == ((0, 11, 1),)


def test_the_fewest_gpus_of_all_frames_are_served():
    capture = load_capture([str(FIXTURES / name) for name in (
        "nccl-1550-h100-allgather-hang.txt", "yolov5-2491-v100-stuck.txt", "dcgm-83-a100-processes.txt")])
    assert len(capture.static) == 2 and all(len(frame.gpus) == 2 for frame in capture.frames)
    assert capture.static[0]["name"] == "NVIDIA H100 80GB HBM3" and capture.driver == "450.102.04"


def test_nvml_calls_answer_like_the_library():
    capture = load_capture([str(FIXTURES / "nccl-1550-h100-allgather-hang.txt")])
    nvml = ReplayNvml(capture, sleep=lambda s: None)
    with pytest.raises(NVMLError) as raised:
        nvml.nvmlDeviceGetCount()
    assert raised.value.value == replay.NVML_ERROR_UNINITIALIZED and str(raised.value) == "Uninitialized"
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(3)
    assert nvml.nvmlDeviceGetIndex(handle) == 3 and nvml.nvmlDeviceGetPowerUsage(handle) == 135000
    assert nvml.nvmlDeviceGetMemoryInfo(handle).used == 75368 * 1024 * 1024
    with pytest.raises(NVMLError, match="Not Supported"):
        nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)   # a table has no throttle reasons
    with pytest.raises(NVMLError):
        nvml.nvmlDeviceGetHandleByIndex(4)
    events = nvml.nvmlEventSetCreate()
    nvml.nvmlDeviceRegisterEvents(handle, replay.nvmlEventTypeXidCriticalError, events)
    with pytest.raises(NVMLError) as raised:
        nvml.nvmlEventSetWait_v2(events, 1000)
    assert raised.value.value == replay.NVML_ERROR_TIMEOUT and nvml.frame_number == 1


def write(lines) -> str:
    handle, path = tempfile.mkstemp(suffix=".jsonl")
    with os.fdopen(handle, "w") as file:
        file.write("\n".join(lines))
    return path


@pytest.mark.parametrize("lines, where", [
    ([json.dumps(HEADER), '{"t": 1, "gpus": [[1, 2, "hot"]]}'], "line 2"),
    ([json.dumps(HEADER), "", '{"t": 1, "gpus": [[1, 2, NaN]]}'], "line 3"),
    ([json.dumps(HEADER), '{"t": 1}'], "line 2"),
    ([json.dumps(dict(HEADER, version=2))], "line 1"),
    (["# recorded by hand", json.dumps(dict(HEADER, static={"gpus": [{"name": 3}]}))], "line 2"),
    ([json.dumps(HEADER)], "no sample"),
    (["|   0  G   On  | 0000:04:00.0 Off | 0 |"], "line 1"),
])
def test_a_file_that_cannot_be_replayed_is_one_error_naming_it(lines, where):
    path = write(lines)
    try:
        with pytest.raises(MlpMagicError) as raised:
            load_capture([path])
        assert where in str(raised.value) and (path in str(raised.value) or where == "no sample")
    finally:
        os.unlink(path)


def test_a_missing_file_is_one_error():
    with pytest.raises(MlpMagicError, match="^NVML replay '/nonexistent/x': no such file$"):
        load_capture(["/nonexistent/x"])


READING = (st.none() | st.integers(-5, 10 ** 6) | st.floats(allow_nan=True) | st.booleans() | JUNK
           | st.sampled_from([1e308, -1e300, 2 ** 70]))
ROWS = st.lists(st.lists(READING, max_size=9), max_size=3)
SAMPLE = st.fixed_dictionaries({"t": READING, "gpus": ROWS},
                               optional={"processes": st.lists(st.lists(READING, max_size=4), max_size=3)})
CALLS = ("nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetMemoryInfo",
         "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetCurrentClocksEventReasons",
         "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetName", "nvmlDeviceGetPciInfo")


@FUZZ
@given(st.lists(SAMPLE.map(json.dumps) | JUNK, max_size=5), st.booleans())
@example(['{"gpus": [], "t": null, "processes": [[Infinity, null, null]]}'], True)   # found by CI
def test_damaged_recordings_are_replayed_or_refused_in_one_line(lines, with_header):
    path = write(([json.dumps(HEADER)] if with_header else []) + lines)
    try:
        capture, message = only_our_error(load_capture, [path])
    finally:
        os.unlink(path)
    if capture is not None:   # what was accepted is served without surprises
        nvml = ReplayNvml(capture, sleep=lambda s: None)
        nvml.nvmlInit()
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            for call in CALLS:
                try:
                    getattr(nvml, call)(handle)
                except NVMLError:
                    pass
