"""The GPU sampler on the replay backend (real captures, frame by frame), on NVML stand-ins that
fail the ways drivers do, and its recordings read back by the replay."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given

from mlp_magic import config
from mlp_magic.gpu import replay
from mlp_magic.gpu.replay import ReplayNvml, load_capture
from mlp_magic.gpu.sampler import GpuSampler, PidRanks, open_sampler, record
from tests.unit.fuzz_checks import FUZZ, only_our_error
from tests.unit.hostile_json import dumps, hostile, replaced

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvml"
HANG = str(FIXTURES / "nccl-1550-h100-allgather-hang.txt")
BURN = str(FIXTURES / "gpu-burn-114-h100.txt")
ROOT = Path(__file__).resolve().parents[3]


class Clock:
    """A clock that moves only when slept on: ticks without waiting."""

    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def replayed(paths, proc_root="/nonexistent", clock=None) -> tuple:
    clock = clock or Clock()
    nvml = ReplayNvml(load_capture(paths), sleep=clock.sleep)
    return GpuSampler(nvml, "replay", proc_root, sleep=clock.sleep, clock=clock), clock


def test_the_replay_serves_the_captures_one_frame_a_tick():
    sampler, clock = replayed([HANG, BURN])
    static = sampler.static()
    assert (static["source"], static["error"], static["driver"]) == ("replay", None, "550.90.07")
    assert static["gpus"][0] == {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
                                 "power_limit_w": 700.0, "pci_bus_id": "0000:04:00.0"}
    assert len(static["gpus"]) == 2   # the GPUs every capture has
    seen = []
    for _ in range(3):
        seen.append(sampler.sample()["gpus"])
        sampler.wait_tick(1.0)
    assert seen[0] == [[100, 75370, 38, 152.0, None, 0, 0], [0, 75368, 34, 129.0, None, 0, 0]]
    assert seen[1] == [[0, 72790, 39, 145.0, None, 0, 0], [4, 72790, 32, 140.0, None, 0, 0]]
    assert seen[2] == seen[0]   # after the last frame, the first again
    assert clock.now == pytest.approx(1003.0)


def recording(tmp_path: Path, frames: list, static=None) -> str:
    path = tmp_path / "recorded.jsonl"
    header = {"format": replay.RECORDING_FORMAT, "version": replay.RECORDING_VERSION,
              "static": static or {"gpus": [{"index": 0, "name": "G", "memory_total_mib": 100,
                                             "power_limit_w": 300.0, "pci_bus_id": "00000000:3B:00.0"}]}}
    path.write_text("\n".join(json.dumps(line) for line in [header] + frames) + "\n")
    return str(path)


def test_an_xid_arrives_as_an_event_during_the_tick_and_stays(tmp_path):
    xids = ((1, 0), (2, 79), (3, 79), (4, 0))
    frames = [{"t": t, "gpus": [[50, 10, 40, 100.5, 4, xid, 0]]} for t, xid in xids]
    sampler, _ = replayed([recording(tmp_path, frames)])
    xids = []
    for _ in range(4):
        xids.append(sampler.sample()["gpus"][0][5])
        sampler.wait_tick(1.0)
    assert xids == [0, 79, 79, 79]   # the last XID seen, as the panel shows it
    assert sampler.sample()["gpus"][0][:5] == [50, 10, 40, 100.5, 4]


def test_compute_processes_get_their_rank_from_their_environment(tmp_path):
    proc = tmp_path / "proc"
    for pid, environ in ((4242, b"OMPI_COMM_WORLD_RANK=3\0OMPI_COMM_WORLD_SIZE=8\0"), (77, b"HOME=/root\0")):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "environ").write_bytes(environ)
    processes = [[0, 4242, 1500], [0, 77, None], [0, 9, 5]]
    frames = [{"t": 1, "gpus": [[1, 2, 3, 4.0, 0, 0, 0]], "processes": processes}]
    sampler, _ = replayed([recording(tmp_path, frames)], proc_root=str(proc))
    assert sampler.sample()["processes"] == [[0, 3, 4242, 1500], [0, None, 77, None], [0, None, 9, 5]]


def test_pid_ranks_forgets_pids_that_left():
    ranks = PidRanks("/nonexistent")
    assert ranks.rank(5) is None and 5 in ranks._known
    ranks.keep_only({6})
    assert ranks._known == {}


def test_a_recording_replays_what_was_recorded(tmp_path):
    sampler, _ = replayed([HANG, BURN])
    path = str(tmp_path / "out.jsonl")
    assert record(sampler, path, seconds=1.5) == 2
    lines = Path(path).read_text().splitlines()
    assert json.loads(lines[0])["static"]["gpus"][1]["pci_bus_id"] == "0000:23:00.0"
    again, _ = replayed([path])
    assert again.static()["gpus"] == sampler.static()["gpus"]
    assert again.sample()["gpus"] == json.loads(lines[1])["gpus"]


class NoGpuNvml:
    """pynvml on a machine whose driver fails (or that has none) in the ways NVML reports."""

    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_DRIVER_NOT_LOADED = 9

    class NVMLError(Exception):
        def __init__(self, value):
            super().__init__(value)
            self.value = value

        def __str__(self):
            names = {12: "NVML Shared Library Not Found", 9: "Driver Not Loaded"}
            return names.get(self.value, "Unknown Error")

    def __init__(self, init_error=None, count=0):
        self.init_error, self.count = init_error, count

    def nvmlInit(self):
        if self.init_error is not None:
            raise self.NVMLError(self.init_error)

    def nvmlDeviceGetCount(self):
        return self.count


@pytest.mark.parametrize("nvml, error, source", [
    (NoGpuNvml(init_error=12), "no GPUs", "none"), (NoGpuNvml(init_error=9), "no GPUs", "none"),
    (NoGpuNvml(count=0), "no GPUs", "nvml"), (NoGpuNvml(init_error=999), "NVML: Unknown Error", "none")])
def test_no_driver_or_no_gpu_is_a_state_not_an_exception(nvml, error, source):
    sampler = GpuSampler(nvml)
    static = sampler.static()
    assert (static["error"], static["source"], static["gpus"]) == (error, source, [])
    assert sampler.sample()["gpus"] == [] and sampler.sample()["processes"] == []
    sampler.wait_tick(0)
    sampler.close()


def test_no_pynvml_at_all_is_no_gpus(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)   # import pynvml -> ImportError
    assert GpuSampler().static()["error"] == "no GPUs"


@pytest.mark.skipif(os.path.exists("/proc/driver/nvidia"), reason="this machine has an NVIDIA driver")
def test_this_machine_without_a_driver_says_no_gpus():
    assert open_sampler(env={}).static() == {"source": "none", "error": "no GPUs", "driver": None, "gpus": []}


class OldBindingNvml(ReplayNvml):
    """A binding with the older throttle-reasons name and no event sets (as on some drivers)."""

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return 0x4

    def __getattribute__(self, name):
        if name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlEventSetCreate"):
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_older_bindings_throttle_reasons_and_a_plain_sleep():
    clock = Clock()
    sampler = GpuSampler(OldBindingNvml(load_capture([HANG]), sleep=clock.sleep), "nvml", sleep=clock.sleep,
                         clock=clock)
    assert [row[4] for row in sampler.sample()["gpus"]] == [0x4] * 4
    sampler.wait_tick(1.0)
    assert clock.slept == [1.0]


def test_a_driver_that_cannot_wait_on_events_falls_back_to_sleeping():
    sampler, clock = replayed([HANG])

    def broken(event_set, timeout_ms):
        raise replay.NVMLError(999)
    sampler.nvml.nvmlEventSetWait_v2 = broken
    sampler.wait_tick(1.0)
    assert sampler._events is None and clock.slept == [1.0]


def test_a_driver_whose_wait_does_not_wait_falls_back_to_sleeping():
    sampler, clock = replayed([HANG])

    def hasty(event_set, timeout_ms):   # a timeout at once: waiting on it would spin
        raise replay.NVMLError(replay.NVML_ERROR_TIMEOUT)
    sampler.nvml.nvmlEventSetWait_v2 = hasty
    sampler.wait_tick(1.0)
    assert sampler._events is None and clock.slept == [1.0]


def test_the_setting_names_one_or_several_captures():
    assert config.nvml_replay({}) is None and config.nvml_replay({"MLP_MAGIC_NVML_REPLAY": ""}) is None
    assert config.nvml_replay({"MLP_MAGIC_NVML_REPLAY": f"{HANG}{os.pathsep}{BURN}"}) == [HANG, BURN]
    assert open_sampler({"MLP_MAGIC_NVML_REPLAY": HANG}).static()["source"] == "replay"


def test_the_recorder_command(tmp_path):
    out = tmp_path / "rec.jsonl"
    command = [sys.executable, "-m", "mlp_magic.gpu.sampler", "--record", str(out), "--seconds", "0.5"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=dict(os.environ, MLP_MAGIC_NVML_REPLAY=BURN, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    assert "1 samples of 2 GPUs" in done.stdout
    header, sample = [json.loads(line) for line in out.read_text().splitlines()]
    assert header["format"] == "mlp_magic-nvml" and sample["gpus"][1][0] == 4


def test_sampled_values_are_plain_json():
    sampler, _ = replayed([BURN])
    assert json.loads(json.dumps(sampler.sample()))["gpus"][0][3] == 145.0


# Recorded by this sampler on a real H100 (driver 580.159.04) under scripts/gpu_check's load
# (bf16 8192^3 products holding 4 GiB): idle, then 99 % at ~697 W, capped by software power
RECORDED_H100 = str(FIXTURES / "h100-matmul-recorded.jsonl")


def test_a_recording_from_a_real_h100_replays_as_it_was_read():
    from mlp_magic.cluster.pure.top_screen import gpu_row

    sampler, _ = replayed([RECORDED_H100])
    static = sampler.static()
    assert (static["driver"], static["gpus"][0]["name"]) == ("580.159.04", "NVIDIA H100 80GB HBM3")
    samples = []
    for _ in range(4):
        samples.append(sampler.sample())
        sampler.wait_tick(1.0)
    assert samples[0]["gpus"][0][:2] == [0, 480] and samples[0]["processes"] == []
    loaded = samples[3]
    util, mem, _temp, power, throttle = loaded["gpus"][0][:5]
    assert util == 99 and mem == 5458 and 690 < power <= 700 and throttle == 4   # SW power cap
    assert loaded["processes"] == [[0, None, 506, 4970]]   # its pid is not one of this machine's ranks
    row = gpu_row("vm", static["gpus"][0], loaded["gpus"][0], loaded["processes"])
    assert row.endswith("99%     5.3/80G   56C   694W  ! SW power cap  [pid 506: 4.9 GiB]"), row


# ---------------------------------------------------------------- hostile recordings (hypothesis)
RECORDED = [json.loads(line) for line in Path(RECORDED_H100).read_text().splitlines()[:3]]
RECORDED[2]["gpus"][0][5] = 79   # an XID arrives on the second tick


@FUZZ
@given(hostile(RECORDED))
@example(replaced(RECORDED, (2, "gpus", 0, 3), float("nan")))   # the replay refuses it: NVML gives no NaN
def test_a_hostile_recording_is_refused_in_one_line_or_sampled_as_strict_json(lines):
    """A recording with what JSON allows in it (the replay refuses what NVML could not give): the
    sampler on what is accepted gives what the agent can send, strict JSON (it refuses NaN)."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "recorded.jsonl")
        with open(path, "w") as handle:
            handle.write("".join(dumps(line) + "\n" for line in lines))
        capture, message = only_our_error(load_capture, [path])
    if capture is None:
        assert path in message
        return
    clock = Clock()
    sampler = GpuSampler(ReplayNvml(capture, sleep=clock.sleep), "replay", "/nonexistent", sleep=clock.sleep,
                         clock=clock)
    sampled = [sampler.static()]
    for _ in range(3):
        sampled.append(sampler.sample())
        sampler.wait_tick(1.0)
    json.dumps(sampled, allow_nan=False)
    sampler.close()
