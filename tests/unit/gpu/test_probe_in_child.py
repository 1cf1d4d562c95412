"""The engine side's probe (``probe_on_engine``) runs in a child process: NVML's library, mapped
for good in whatever process loads it, stays out of the user's rank (an H100 host's first rank
held 88 MiB resident against the others' 59 while it probed in-process), and a child that never
answers is killed at the deadline. Real children: this Python, a stand-in nvidia-smi printing a
real capture (no GPU here), and scripts in place of the Python that fail in each way."""
from __future__ import annotations

import os
import re
import signal
import stat
import sys
import time
from pathlib import Path

import pytest

from mlp_magic.gpu.nvml_probe import nvml_library_loads
from mlp_magic.gpu.probe import probe_in_child, probe_local, probe_on_engine
from tests.timing import hang_bound, wait_until

from tests.unit.gpu.test_probe import TOPO, gone_soon, install_smi

# Where NVML answers, the child never asks the stand-in nvidia-smi (the GPU check covers it there).
needs_no_nvml = pytest.mark.skipif(nvml_library_loads(), reason="NVML answers here before nvidia-smi")


def script(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@needs_no_nvml
def test_the_probe_runs_in_a_child_that_is_no_rank(tmp_path, monkeypatch):
    seen = tmp_path / "seen"
    monkeypatch.setenv("PATH", install_smi(tmp_path, (
        'echo "$PPID ${RANK-none} ${OMPI_COMM_WORLD_RANK-none}" >> %s\n'
        'if [ "$1" = topo ]; then cat "%s"; else exit 4; fi\n') % (seen, TOPO / "h100-4gpu-8nic.txt")))
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "3")
    data = probe_on_engine(8.0, "worker0")
    assert data["host"] == "worker0" and data["source"] == "nvidia-smi"
    assert data["links"]["GPU1"]["GPU2"] == "NV18" and len(data["gpus"]) == 4
    parent, rank, world_rank = seen.read_text().splitlines()[0].split()
    assert int(parent) != os.getpid()        # nvidia-smi was the child's child, not ours
    assert (rank, world_rank) == ("none", "none")   # the child left the rank's identity behind


def test_a_child_that_never_answers_is_killed_at_the_deadline(tmp_path):
    pid_file = tmp_path / "pid"
    python = script(tmp_path, "python", "echo $$ > %s\nexec sleep 30\n" % pid_file)
    started = time.monotonic()
    found = probe_in_child(1.0, "worker3", python=python)
    assert time.monotonic() - started < 6
    assert found.host == "worker3" and found.source == "none" and found.gpus == []
    assert found.error == "GPU probe: no answer in 1s"
    assert gone_soon(int(pid_file.read_text()))


def test_a_child_that_fails_is_named_by_its_last_line(tmp_path):
    python = script(tmp_path, "python", "echo 'Traceback (most recent call last):' >&2\n"
                                        "echo \"ModuleNotFoundError: No module named 'mlp_magic'\" >&2\n"
                                        "exit 1\n")
    found = probe_in_child(5.0, "worker1", python=python)
    assert found.error == "GPU probe: exit 1: ModuleNotFoundError: No module named 'mlp_magic'"
    assert probe_in_child(5.0, "w", python=script(tmp_path, "quiet", "exit 2\n")).error == \
        "GPU probe: exit 2: no output"


def test_a_child_that_cannot_start_or_talks_nonsense_is_said(tmp_path):
    missing = probe_in_child(5.0, "worker2", python=str(tmp_path / "no-such-python"))
    assert missing.error.startswith("GPU probe: [Errno 2]") and missing.source == "none"
    nonsense = probe_in_child(5.0, "worker2", python=script(tmp_path, "python", "echo hello\n"))
    assert nonsense.error.startswith("bad JSON: ") and nonsense.host == "worker2"


def test_a_child_whose_pipe_a_runaway_holds_is_left_after_its_kill(tmp_path):
    """The child started something in a session of its own that keeps the output pipe open (as a
    wedged nvidia-smi under it would): killing the child's group does not close the pipe, and
    the rank waits KILLED_WAIT_S for it, not for the runaway (30 s)."""
    pid_file = tmp_path / "runaway"
    python = script(tmp_path, "python", "setsid sleep 30 &\necho $! > %s\nexec sleep 30\n" % pid_file)
    started = time.monotonic()
    try:
        # 3 s, not 1: on a loaded 2-core machine the shell may not reach its runaway within 1 s,
        # and a probe killed before it proves nothing (the bound, 20 s, stays under the runaway's 30)
        found = probe_in_child(3.0, "worker4", python=python)
        assert time.monotonic() - started < hang_bound(4.0)
        assert found.error == "GPU probe: no answer in 3s"
        assert pid_file.exists(), "the runaway never started: the test proved nothing"
    finally:
        if wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 2.0):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


@needs_no_nvml
def test_the_local_probe_keeps_one_deadline_for_all_its_steps(tmp_path, monkeypatch):
    """nvidia-smi's matrix takes 1.5 s of 2, and its query hangs: the query gets what is left,
    not another 2 s (a child probing for a rank would be killed before it could say why)."""
    monkeypatch.setenv("PATH", install_smi(tmp_path, (
        'if [ "$1" = topo ]; then sleep 1.5; cat "%s"; else exec sleep 30; fi\n')
        % (TOPO / "h100-4gpu-8nic.txt")))
    found = probe_local(timeout=2.0, host="worker0")
    assert found.source == "nvidia-smi" and found.links["GPU1"]["GPU2"] == "NV18"
    waited = float(re.search(r"no answer in ([0-9.]+)s$", found.error).group(1))
    assert 0.1 <= waited <= 0.6, found.error


def test_the_child_runs_the_ranks_own_copy_wherever_the_rank_went(tmp_path, monkeypatch):
    """A cell may take the rank's working folder anywhere, and the rank's mlp_magic may be on no
    path a fresh Python has (here: no site-packages, ``-S``): the child still runs it."""
    python = script(tmp_path, "python", 'exec %s -S "$@"\n' % sys.executable)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    found = probe_in_child(20.0, "worker5", python=python)
    assert found.host == "worker5" and found.error is None, found.error
