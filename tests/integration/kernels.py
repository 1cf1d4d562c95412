"""Kernels of their own, driven cell by cell: real ipykernels (tests/kernel.py), as Jupyter starts
them; a World that outlives its kernel needs a kernel that can die, apart from the session's."""
import time

import psutil

from tests import kernel as real
from tests.timing import hang_bound


class Kernel:
    """A kernel with mlp_magic loaded; ``cell(code)`` runs one and returns (what a frontend shows
    of it, its error as text or None)."""

    def __init__(self, env: dict | None = None):
        self.kernel = real.Kernel(env=env, echo=False)
        self.pid = self.kernel.pid
        self.process = self.kernel.manager.provisioner.process   # a Popen
        self._pending = None

    def cell(self, code: str, seconds: float = 120) -> tuple:
        shown = self._collect_pending(seconds)
        run = self.kernel.run_cell(code, timeout=hang_bound(seconds))
        error = run.error_in_exec
        return shown + run.shown, None if error is None else str(error)

    def send(self, code: str) -> None:
        """Start a cell and return at once (what it shows is read by the next ``cell``)."""
        self._collect_pending(120)
        self._pending = self.kernel.send(code)

    def _collect_pending(self, seconds: float) -> str:
        if self._pending is None:
            return ""
        pending, self._pending = self._pending, None
        return self.kernel.wait(pending, timeout=hang_bound(seconds)).shown

    def world_pids(self) -> set:
        """Every process of its World: its children's trees (the keeper's too)."""
        parent = psutil.Process(self.pid)
        return {p.pid for p in parent.children(recursive=True)}

    def child(self, program: str):
        """Its live child process whose command line names ``program``, or None."""
        for process in psutil.Process(self.pid).children():
            try:
                if program in " ".join(process.cmdline()):
                    return process
            except psutil.Error:   # a zombie, or gone
                continue
        return None

    def kill(self) -> None:
        """SIGKILL, as the OOM killer or a crash ends a kernel; reaped here, as Jupyter does."""
        self.process.kill()
        self.process.wait(10)
        self._stop_channels()

    def exit(self) -> None:
        """As a kernel shut down from Jupyter: its interpreter ends normally (atexit runs)."""
        self.kernel.client.shutdown()
        self.process.wait(hang_bound(30))
        self._stop_channels()

    def _stop_channels(self) -> None:
        self.kernel.client.stop_channels()
        self.kernel.manager.cleanup_resources()


def running(pids) -> set:
    alive = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def wait_until_gone(pids, seconds: float) -> set:
    deadline = time.monotonic() + seconds
    while running(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return running(pids)
