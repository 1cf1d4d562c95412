"""NVML's library before pynvml: a host without the driver's library never imports pynvml (an
engine that probes its host's GPUs stays lean); a host with it probes through pynvml."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mlp_magic.gpu.nvml_probe import NVML_LIBRARY, nvml_library_loads

HERE = nvml_library_loads()


def probe_in_fresh_python() -> dict:
    code = ("import json, sys\nfrom mlp_magic.gpu.nvml_probe import probe_nvml\nfound = probe_nvml()\n"
            "print(json.dumps({'pynvml': 'pynvml' in sys.modules,\n"
            "                  'gpus': len(found.gpus) if found is not None else None}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_library_is_found_by_the_loader_name_pynvml_uses():
    assert NVML_LIBRARY == "libnvidia-ml.so.1"
    assert nvml_library_loads("libc.so.6") is True
    assert nvml_library_loads("libmlp-magic-no-such-library.so.1") is False


@pytest.mark.skipif(HERE, reason="this host has the NVIDIA driver's NVML library")
def test_without_the_driver_the_probe_answers_none_and_pynvml_stays_out():
    assert probe_in_fresh_python() == {"pynvml": False, "gpus": None}


@pytest.mark.skipif(not HERE, reason="no NVIDIA driver here")
def test_with_the_driver_the_probe_asks_pynvml():
    found = probe_in_fresh_python()
    assert found["pynvml"] is True and found["gpus"] >= 1
