"""``mlp-magic doctor`` across namespace hosts with real sshd: the odd host named with its differences.

Each host's sshd can be given variables of its own (``SetEnv`` in its sshd_config, sshd restarted):
a host whose PYTHONPATH brings another numpy and sets an NCCL variable the others lack is named with
both; a host whose sshd is down is "unreachable"; GPU findings come from the fake NVML replaying a
real capture (``MLP_MAGIC_NVML_REPLAY``), one host's with an XID, uncorrected ECC and a GPU fewer.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from mlp_magic.gpu.replay import RECORDING_FORMAT, RECORDING_VERSION, load_capture
from tests.timing import hang_bound

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "nvml")
H100 = os.path.join(FIXTURES, "gpu-burn-114-h100.txt")


@contextmanager
def sshd_env(bed, per_host: dict):
    """{host index: {NAME: value}} set by that host's sshd for every session, for the block."""
    for index, variables in per_host.items():
        host = bed.hosts[index]
        path = os.path.join(host.workdir, "sshd_config")
        with open(path) as handle:
            kept = [line for line in handle.read().splitlines() if not line.startswith("SetEnv ")]
        setting = " ".join(f'"{name}={value}"' for name, value in variables.items())
        with open(path, "w") as handle:
            handle.write("\n".join(kept + [f"SetEnv {setting}"]) + "\n")
        bed.stop_sshd(index)
        bed.start_sshd(index)
    try:
        yield
    finally:
        for index in per_host:
            path = os.path.join(bed.hosts[index].workdir, "sshd_config")
            with open(path) as handle:
                kept = [line for line in handle.read().splitlines() if not line.startswith("SetEnv ")]
            with open(path, "w") as handle:
                handle.write("\n".join(kept) + "\n")
            bed.stop_sshd(index)
            bed.start_sshd(index)


def doctor(bed, *args, env=None, timeout=120):
    environ = dict(os.environ, MLP_MAGIC_SSH=" ".join(bed.ssh_command()), **bed.env(), **(env or {}))
    # PYTHONPATH too: the doctor gives every host the caller's, as mpiexec gives the ranks (a
    # caller's PYTHONPATH, such as a test runner's plugin folder, hid a host's own from the probe)
    for name in ("MLP_MAGIC_NVML_REPLAY", "MLP_WORKER_GPU", "MLP_MPI_HOSTS", "PYTHONPATH"):
        if env is None or name not in env:
            environ.pop(name, None)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "doctor", "-H", ",".join(bed.host_names()),
                           *args], env=environ, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


def findings(done) -> dict:
    assert "Traceback" not in done.stderr + done.stdout
    report = json.loads(done.stdout)
    return {(f["check"], f["title"]): f for f in report["findings"]}


def shadow_numpy(tmp_path) -> str:
    """A folder whose numpy (and its metadata) is version 1.0.0: PYTHONPATH=that shadows the real one."""
    folder = tmp_path / "shadow"
    (folder / "numpy").mkdir(parents=True)
    (folder / "numpy" / "__init__.py").write_text("__version__ = '1.0.0'\n")
    (folder / "numpy-1.0.0.dist-info").mkdir()
    (folder / "numpy-1.0.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: numpy\nVersion: 1.0.0\n")
    return str(folder)


def test_the_host_with_another_pythonpath_and_an_nccl_variable_is_named_with_both(bed, tmp_path):
    with sshd_env(bed, {2: {"PYTHONPATH": shadow_numpy(tmp_path), "NCCL_IB_DISABLE": "1"}}):
        done, took = doctor(bed, "--json", "--timeout", "40", "--package", "pip")
        text, _ = doctor(bed, "--timeout", "40", "--no-import")
    print(f"4 hosts, imports included: {took:.1f} s")
    assert done.returncode == 1, done.stderr
    found = findings(done)
    numpy = found[("software", "numpy")]
    assert numpy["severity"] == "error" and numpy["hosts"] == ["worker2"]
    assert numpy["values"][0]["hosts"] == ["worker0", "worker1", "worker3"]
    assert numpy["values"][1] == {"value": "1.0.0", "hosts": ["worker2"]}
    assert "shadow/numpy/__init__.py" in numpy["detail"]
    nccl = found[("environment", "NCCL_IB_DISABLE")]
    assert nccl["hosts"] == ["worker2"] and nccl["detail"] == "worker2: 1; worker[0-1,3]: not set"
    odd = {h for f in json.loads(done.stdout)["findings"] for h in f["hosts"] if f["severity"] == "error"}
    assert odd == {"worker2"}, json.loads(done.stdout)["findings"]
    shared = {s["title"]: s["value"] for s in json.loads(done.stdout)["shared"]}
    assert "pip" in shared and "torch" in shared
    # torch imports numpy: on worker2 it meets the shadow, and says so (it is left out of the versions)
    assert found[("software", "import torch")]["hosts"] == ["worker2"]
    assert text.returncode == 1 and "worker2: 1.0.0" in text.stdout and "NCCL_IB_DISABLE" in text.stdout
    assert text.stdout.index("ERROR") < text.stdout.index("All 4 hosts that answered share:")


def test_a_host_without_sshd_is_an_unreachable_finding(bed):
    with bed.host_down(1):
        done, took = doctor(bed, "--json", "--no-import", "--timeout", "8")
    assert done.returncode == 1
    found = findings(done)
    unreachable = found[("reachability", "unreachable")]
    assert unreachable["hosts"] == ["worker1"] and "Connection refused" in unreachable["detail"]
    assert json.loads(done.stdout)["answered"] == 3
    assert took < hang_bound(4.0), took   # a few seconds, the refused host at once: a hang guard


def test_a_host_without_python_and_a_broken_module_are_findings(bed, tmp_path):
    broken = tmp_path / "broken"
    (broken / "ipykernel").mkdir(parents=True)
    (broken / "ipykernel" / "__init__.py").write_text("raise RuntimeError('half-installed wheel')\n")
    with sshd_env(bed, {0: {"PATH": "/nonexistent"}, 3: {"PYTHONPATH": str(broken)}}):
        done, _ = doctor(bed, "--json", "--timeout", "40", "--python", "python3")
    assert done.returncode == 1
    found = findings(done)
    assert found[("reachability", "no Python")]["hosts"] == ["worker0"]
    broken_import = found[("software", "import ipykernel")]
    assert broken_import["hosts"] == ["worker3"]
    assert "RuntimeError: half-installed wheel" in broken_import["detail"]


def gpu_recording(tmp_path) -> str:
    """The real H100 capture as a recording, with GPU 1 gone bad in its second frame (XID 79,
    2 uncorrected ECC errors, hardware thermal slowdown) and GPU 0 alone."""
    capture = load_capture([H100])
    static = {"driver": "535.54.03", "gpus": [dict(capture.static[0])]}
    first = [list(capture.frames[0].gpus[0])]
    bad = [first[0][:4] + [0x40, 79, 2]]
    lines = [{"format": RECORDING_FORMAT, "version": RECORDING_VERSION, "static": static},
             {"t": 1, "gpus": first}, {"t": 2, "gpus": bad}]
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def test_fake_nvml_drives_the_gpu_findings(bed, tmp_path):
    replays = {i: {"MLP_MAGIC_NVML_REPLAY": H100} for i in range(3)}
    replays[3] = {"MLP_MAGIC_NVML_REPLAY": gpu_recording(tmp_path)}
    with sshd_env(bed, replays):
        done, _ = doctor(bed, "--json", "--no-import", "--timeout", "15", env={"MLP_WORKER_GPU": "2"})
    assert done.returncode == 1
    found = findings(done)
    assert found[("gpus", "GPU count")]["hosts"] == ["worker3"]
    assert "1 GPU seen, MLP_WORKER_GPU=2" in found[("gpus", "GPU count")]["detail"]
    assert found[("gpus", "XID error")]["hosts"] == ["worker3"]
    assert found[("gpus", "XID error")]["detail"] == "GPU 0: XID 79"
    assert found[("gpus", "uncorrected ECC")]["detail"] == "GPU 0: 2 uncorrected ECC errors"
    assert found[("gpus", "throttling")]["detail"] == "GPU 0: hardware thermal slowdown"
    driver = found[("gpus", "driver")]
    assert driver["hosts"] == ["worker3"] and driver["detail"] == "worker3: 535.54.03; worker[0-2]: 550.90.07"


@contextmanager
def slow_link(bed, index: int, rate: str = "40mbit"):
    """Traffic to host ``index`` limited to ``rate`` (a token bucket on its veth) for the block."""
    device = bed.hosts[index].veth
    subprocess.run(["tc", "qdisc", "add", "dev", device, "root", "tbf", "rate", rate, "burst", "64kb",
                    "latency", "500ms"], check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", device, "root"], capture_output=True)


@pytest.mark.parametrize("backend, measured", [("torch", "gloo"), ("mpi", "mpi")])
def test_links_across_hosts_name_the_slow_one(bed, backend, measured):
    with slow_link(bed, 2):
        done, took = doctor(bed, "--json", "--no-import", "--links", "--np", "4", "--size", "2",
                            "--fraction", "0.5", "--links-backend", backend, timeout=300)
    print(f"--links on 4 hosts ({backend}): {took:.1f} s")
    report = json.loads(done.stdout)
    links = report["links"]
    assert links is not None, report["findings"]
    assert links["backend"] == measured and links["ranks"] == 4 and len(links["pairs"]) == 6
    found = findings(done)
    assert found[("links", "slow host")]["hosts"] == ["worker2"]
    slow = [f for f in report["findings"] if f["title"] == "slow pair"]
    assert sorted(h for f in slow for h in f["hosts"] if h != "worker2") == ["worker0", "worker1", "worker3"]
    assert done.returncode == 1
