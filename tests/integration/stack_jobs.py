"""Real jobs for the ``mlp-magic stacks`` tests, started outside any notebook: an mpi4py job
(mpiexec) and a torch gloo job (torchrun). One rank sleeps in ``sleeper()``, the others wait in
a barrier (``wait_in_barrier()``). Each rank writes ``rank<N>.json`` (its pid, host and the
variables that name its job) once it is about to block; ``Job.stop`` kills the whole job and
checks that none of its processes is left."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from mlp_magic.core.proc_ranks import rank_of
from mlp_magic.output.pure.text import RULE

_READY = """
def ready(rank, **more):
    import json, os, socket
    keep = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_NAMESPACE", "PMIX_RANK", "RANK",
            "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "GROUP_RANK")
    info = dict(rank=rank, pid=os.getpid(), host=socket.gethostname(),
                env={k: v for k, v in os.environ.items() if k in keep}, **more)
    path = os.path.join(READY, f"rank{rank}.json")
    with open(path + ".tmp", "w") as handle:
        json.dump(info, handle)
    os.rename(path + ".tmp", path)


def sleeper():
    while True:
        time.sleep(0.5)
"""

MPI_JOB = """import os, subprocess, sys, time
from mpi4py import MPI
READY, SLEEPER, CHILD = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "child"
comm = MPI.COMM_WORLD
""" + _READY + """

def wait_in_barrier():
    request = comm.Ibarrier()   # polled, not MPI_Barrier's busy wait: the machine is shared
    while not request.Test(): time.sleep(0.05)   # one line: a read in Test() is the sleep's line
    # (on two lines, a stack read in Test() named line 25 and one in the sleep 26: a CI flake)


def main():
    child = None
    if CHILD and comm.rank == 0:   # a DataLoader-like child: it inherits the rank's environment
        child = subprocess.Popen([sys.executable, "-c", "import os, time\\nparent = os.getppid()\\n"
                                  "while os.getppid() == parent:\\n    time.sleep(0.2)"]).pid
    ready(comm.rank, child=child)
    if comm.rank == SLEEPER:
        sleeper()
    wait_in_barrier()


main()
"""

TORCH_JOB = """import os, sys, time
import torch.distributed as dist
READY, SLEEPER = sys.argv[1], int(sys.argv[2])
""" + _READY + """

def wait_in_barrier():
    dist.barrier()


def main():
    dist.init_process_group("gloo")
    ready(dist.get_rank())
    if dist.get_rank() == SLEEPER:
        sleeper()
    wait_in_barrier()


main()
"""


class Job:
    """A job started with ``argv`` (its own session); ``ranks``: {rank: ready info}."""

    def __init__(self, argv: list, folder: str, count: int, env: dict | None = None,
                 wait: float = 120.0):
        self.folder, self.count = folder, count
        with open(f"{folder}/job.log", "wb") as log:
            self.launcher = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True,
                                             env=dict(os.environ, **(env or {})))
        self.ranks: dict = {}
        try:
            self._wait_ready(wait)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, wait: float) -> None:
        deadline = time.monotonic() + wait
        while len(self.ranks) < self.count:
            if self.launcher.poll() is not None:
                raise RuntimeError(f"the job exited ({self.launcher.returncode}): {self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(self.ranks)} of {self.count} ranks ready after {wait} s: "
                                   f"{self.log()[-3000:]}")
            for name in os.listdir(self.folder):
                if name.startswith("rank") and name.endswith(".json"):
                    with open(os.path.join(self.folder, name)) as handle:
                        info = json.load(handle)
                    self.ranks[info["rank"]] = info
            time.sleep(0.2)
        time.sleep(1.0)   # from "ready" to the blocking call: a few lines

    def log(self) -> str:
        with open(f"{self.folder}/job.log", errors="replace") as handle:
            return handle.read()

    @property
    def job(self) -> str:
        """The job's name as ``mlp-magic stacks`` shows it (from a rank's own variables)."""
        return rank_of(self.ranks[0]["env"]).job

    def pids(self) -> list:
        found = [info["pid"] for info in self.ranks.values()]
        return found + [info["child"] for info in self.ranks.values() if info.get("child")]

    def stop(self) -> None:
        """TERM the launcher's session, then KILL; every process of the job must be gone."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.launcher.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.launcher.wait(15)
                break
            except subprocess.TimeoutExpired:
                continue
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in self.pids()) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [pid for pid in self.pids() if alive(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)   # ours: a rank of this job
        assert left == [], f"the job left processes behind: {left}"


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def write_job(folder: str, text: str) -> str:
    path = os.path.join(folder, "job.py")
    with open(path, "w") as handle:
        handle.write(text)
    return path


def stacks(*args: str, env: dict | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """``mlp-magic stacks ARGS`` as a user runs it: its own process."""
    return subprocess.run([sys.executable, "-m", "mlp_magic.cli", "stacks", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


def section(output: str, title_part: str) -> str:
    """The part of the report under the section whose title names ``title_part``."""
    parts = output.split(f"\n{RULE} ")
    found = [p for p in parts if title_part in p.split("\n", 1)[0]]
    assert len(found) == 1, f"no single section for {title_part!r} in:\n{output}"
    return found[0].split("\nnot shown:\n")[0]
