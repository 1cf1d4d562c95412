"""Issue 32 across hosts: a kept World of ranks on two namespace hosts (encrypted) outlives its
SIGKILLed kernel; another kernel attaches through the encrypted channel and reads the ranks'
state; `mlp-magic stop` leaves nothing on either host."""
import json
import os
import subprocess
import sys
import time

import pytest

from tests.integration.kernels import Kernel, wait_until_gone
from tests.timing import hang_bound

pytestmark = pytest.mark.timeout(400)


def test_a_kept_world_across_hosts_is_attached_in_a_new_kernel(healthy_testbed, tmp_path):
    bed = healthy_testbed
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("worker0 slots=2\nworker1 slots=2\n")
    env = {**bed.env(), "MLP_MAGIC_SSH": " ".join(bed.ssh_command()),
           "MLP_MAGIC_STATE_DIR": str(tmp_path / "worlds")}
    first = Kernel(env)
    second = None
    try:
        out, error = first.cell(f"%%mpirun --hostfile {hostfile} -np 4 --keep\nimport socket\n"
                                "held = (rank, socket.gethostname())")
        assert error is None and ", encrypted)" in out and "kept: outlives its kernel" in out, out
        family = first.world_pids()
        first.kill()
        second = Kernel(env)
        out, error = second.cell("%mpirun --attach")
        assert error is None and "attached to World of 4 ranks" in out, out
        out, error = second.cell("%%mpirun\nprint(*held)")
        assert error is None, out
        assert "---------------- ranks 0-3 (4) on worker[0-1] ----------------" in out, out
        stopped = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "worlds"], capture_output=True,
                                 text=True, env={**os.environ, **env}, timeout=hang_bound(60))
        assert f"{second.pid} alive" in stopped.stdout, stopped.stdout
    finally:
        for kernel in (first, second):
            if kernel is not None and kernel.process.poll() is None:
                kernel.kill()
    # still kept after the second kernel's death: stopped from a terminal
    worlds = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "worlds", "--json"], capture_output=True,
                            text=True, env={**os.environ, **env}, timeout=hang_bound(60))
    [world] = json.loads(worlds.stdout)
    done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "stop", world["id"]], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=hang_bound(60))
    assert done.returncode == 0, done.stderr
    assert wait_until_gone(family, hang_bound(20)) == set()
    deadline = time.monotonic() + hang_bound(20)
    while (left := ours_on(bed)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == [], left


def ours_on(bed) -> list:
    """What of the World still runs in either host's namespace (ranks, agents)."""
    return [line for index in (0, 1) for _, line in bed.processes_on(index)
            if "ipyparallel" in line or "mlp_magic" in line]
