"""probe_local on this (GPU-less) machine, and against an nvidia-smi stand-in on PATH.

The stand-in is a real executable run through a real subprocess; it prints a real capture,
since no GPU (and no real nvidia-smi) exists here.
"""
from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from mlp_magic.gpu.probe import probe_local

TOPO = Path(__file__).resolve().parents[2] / "fixtures" / "topo"
QUERY = ("0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559, 4, 0\n"
         "3, NVIDIA H100 80GB HBM3, 00000000:DB:00.0, 81559, 40000, 88\n")


def install_smi(folder: Path, body: str) -> str:
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(folder) + os.pathsep + os.environ["PATH"]


def smi_printing(folder: Path, topo: Path, query: str) -> str:
    (folder / "query.csv").write_text(query)
    return install_smi(folder, 'if [ "$1" = topo ]; then cat "%s"; else cat "%s"; fi\n'
                       % (topo, folder / "query.csv"))


def test_cpu_only_machine_is_source_none():
    if shutil.which("nvidia-smi") or os.path.exists("/dev/nvidiactl"):
        pytest.skip("this machine has an NVIDIA driver; the CPU-only answer cannot be observed")
    found = probe_local(timeout=5.0, host="cpu0")
    assert found.to_dict() == {"host": "cpu0", "source": "none", "gpus": [], "nics": [], "links": {},
                               "error": None}


def test_nvidia_smi_topo_and_query(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", smi_printing(tmp_path, TOPO / "h100-4gpu-8nic.txt", QUERY))
    found = probe_local(timeout=5.0, host="worker0", use_nvml=False)
    assert found.source == "nvidia-smi" and found.error is None
    assert found.links["GPU1"]["GPU2"] == "NV18" and found.nics[7] == "mlx5_7"
    assert found.gpus[3].memory_used_mib == 40000 and found.gpus[3].utilization_pct == 88
    assert found.gpus[3].pci_bus_id == "0000:db:00.0" and found.gpus[3].cpu_affinity == "0-79"


def test_bad_query_output_keeps_the_matrix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", smi_printing(tmp_path, TOPO / "dgx1-v100-8gpu-2nic.txt", "garbage\n"))
    found = probe_local(timeout=5.0, host="worker0", use_nvml=False)
    assert found.source == "nvidia-smi" and found.links["GPU2"]["mlx5_0"] == "PIX"
    assert "line 1: expected 6 comma-separated fields" in found.error


def test_failing_nvidia_smi_is_no_gpu_with_its_message(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", install_smi(tmp_path, (
        "echo 'NVIDIA-SMI has failed because it couldn'\\''t communicate with the NVIDIA driver.'\n"
        "exit 9\n")))
    found = probe_local(timeout=5.0, host="worker0", use_nvml=False)
    assert found.source == "none" and found.gpus == []
    assert found.error.endswith("topo: exit 9: NVIDIA-SMI has failed because it couldn't communicate "
                                "with the NVIDIA driver.")


def running(pid: int) -> bool:
    try:
        state = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a killed orphan may wait a moment as a zombie for its reaper


def gone_soon(pid: int, seconds: float = 3.0) -> bool:
    """SIGKILL is delivered asynchronously: allow the kernel a moment to finish the process."""
    deadline = time.monotonic() + seconds
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_hanging_nvidia_smi_times_out(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("PATH", install_smi(tmp_path, "echo $$ > %s\nsleep 30 &\necho $! >> %s\nwait\n"
                                           % (pids, pids)))
    started = time.monotonic()
    found = probe_local(timeout=2.0, host="worker0", use_nvml=False)
    assert time.monotonic() - started < 10
    assert found.source == "none" and "no answer in 2s" in found.error
    # The shell and its sleep (a grandchild holding the pipe) are killed, not left running.
    shell, sleep = (int(line) for line in pids.read_text().split())
    assert gone_soon(shell) and gone_soon(sleep)
