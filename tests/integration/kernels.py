"""Kernels in processes of their own, driven cell by cell (a World that outlives its kernel needs
a kernel that can die: the test's own shell cannot)."""
import json
import os
import queue
import subprocess
import sys
import threading
import time

import psutil

from tests.timing import hang_bound

DRIVER = r"""
import json, sys
from IPython.testing.globalipapp import start_ipython
ip = start_ipython()
ip.run_line_magic("load_ext", "mlp_magic")
print("READY", flush=True)
for line in sys.stdin:
    result = ip.run_cell(json.loads(line))
    error = result.error_in_exec or result.error_before_exec
    print("\nCELL-DONE " + json.dumps(None if error is None else str(error)), flush=True)
"""


class Kernel:
    """A Python with IPython and mlp_magic loaded; ``cell(code)`` runs one and returns (its
    output, its error or None)."""

    def __init__(self, env: dict | None = None):
        self.process = subprocess.Popen([sys.executable, "-c", DRIVER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, **(env or {})})
        self.pid = self.process.pid
        self._lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._read_until("READY", hang_bound(30))

    def cell(self, code: str, seconds: float = 120) -> tuple:
        self.send(code)
        lines = self._read_until("CELL-DONE", hang_bound(seconds))
        error = json.loads(lines[-1].removeprefix("CELL-DONE "))
        return "".join(lines[:-1]), error

    def send(self, code: str) -> None:
        """Start a cell and return at once (its output is read by the next ``cell``)."""
        self.process.stdin.write(json.dumps(code) + "\n")
        self.process.stdin.flush()

    def _read_until(self, marker: str, seconds: float) -> list:
        """Its lines up to the one with ``marker`` (from the marker on: an older IPython writes
        terminal title sequences without a newline before it); every wait bounded (a thread
        reads the pipe)."""
        deadline, lines = time.monotonic() + seconds, []
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"the kernel ended: {''.join(lines)[-3000:]}")
            if marker in line:
                return lines + [line[line.index(marker):]]
            lines.append(line)
        raise AssertionError(f"no {marker} within {seconds} s: {''.join(lines)[-3000:]}")

    def _read(self) -> None:
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

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
        self.process.kill()
        self.process.wait(10)

    def exit(self) -> None:
        """As a kernel shut down from Jupyter: its interpreter ends normally (atexit runs)."""
        self.process.stdin.close()
        self.process.wait(hang_bound(30))


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
