"""``mlp-magic top`` against a real World of the session's kernel: one frame to a pipe, and the full
screen in a real pseudo-terminal that `q` leaves cleanly."""
import os
import pty
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests import worlds
from tests.timing import hang_bound, wait_until

from tests.integration.conftest import run

pytestmark = pytest.mark.timeout(120)
TOP = [sys.executable, "-m", "mlp_magic.cli", "top", "-H", "localhost:4"]


@pytest.fixture
def world4(ip):
    shared = worlds.current_world()
    if shared is not None and shared.dead_ranks:   # an earlier test killed a rank: it lives on without it
        run(ip, "%mpirun --stop")
    assert run(ip, "%%mpirun -np 4\npass") is None
    return worlds.current_world()


def test_one_frame_shows_the_world_its_ranks_and_no_gpus(world4):
    done = subprocess.run(TOP + ["--once"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"World {world4.id}: 4 ranks, openmpi" in lines[1]
    assert lines[2] == "  4 ranks: 4 idle " + lines[2].split(" idle ")[1]
    assert any(line.split() == ["localhost", "0-3", "...."] for line in lines)


class PtyReader:
    """Everything a program writes to its pseudo-terminal, read by a thread (the test's main
    thread runs cells meanwhile)."""

    def __init__(self, fd: int):
        self.fd, self.seen, self._lock = fd, b"", threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                self.seen += data

    def wait_for(self, wanted: bytes, seconds: float, after: int = 0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with self._lock:
                if wanted in self.seen[after:]:
                    return True
            time.sleep(0.05)
        return False


def test_the_screen_follows_a_cell_and_q_quits(ip, world4):
    pid, fd = pty.fork()
    if pid == 0:   # the child: top on the pseudo-terminal
        os.execv(sys.executable, TOP)
    try:
        screen = PtyReader(fd)
        assert screen.wait_for(b"4 idle", 30)
        mark = len(screen.seen)
        assert run(ip, "%%mpirun\nimport time\nif rank == 1:\n    time.sleep(3)") is None
        assert screen.wait_for(b"3 idle", hang_bound(1.0), after=mark) or b"1 busy" in screen.seen[mark:]
        assert b"localhost        0-3  .#.." in screen.seen[mark:]
        os.write(fd, b"q")
        assert screen.wait_for(b"\x1b[?1049l", hang_bound(0.5))   # the terminal's own screen is back
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)


@pytest.mark.alone   # counts agents machine-wide
def test_with_no_world_top_starts_the_hosts_agent_itself_and_leaves_none(tmp_path):
    """No World: ``top`` runs the agent in --stdio mode on the host (here directly; elsewhere over
    ssh), replaying a real capture; the agent ends with ``top``."""
    from pathlib import Path

    import psutil

    capture = Path(__file__).resolve().parents[1] / "fixtures/nvml/nccl-1550-h100-allgather-hang.txt"
    (tmp_path / "worlds").mkdir()
    env = dict(os.environ, MLP_MAGIC_STATE_DIR=str(tmp_path / "worlds"), MLP_MAGIC_NVML_REPLAY=str(capture))

    def agents() -> set:
        return {p.pid for p in psutil.process_iter(["cmdline"])
                if "mlp_magic.agent" in " ".join(p.info["cmdline"] or [])}

    before = agents()
    done = subprocess.run(TOP + ["--once"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    gpus = [line.split() for line in done.stdout.splitlines() if "GPU" in line and "localhost" in line]
    # the capture: GPU0 at 100 %, 75370 of 81559 MiB, 38 C, 152 W; four GPUs
    assert len(gpus) == 4 and gpus[0][1:] == ["GPU0", "100%", "73.6/80G", "38C", "152W"], done.stdout
    assert wait_until(lambda: agents() <= before, hang_bound(0.5)), agents() - before   # it ends with top
