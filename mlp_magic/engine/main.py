"""The program every rank runs: ipyparallel's engine, registered under the rank's own number.

Asking the controller for engine id = launcher rank makes a start readable before any engine
has run a line of ours: which ranks are in, which are missing, on which hosts. Each log line
carries the rank too, so a failed start can quote the missing ranks' own lines out of the
launcher's shared log.

A rank's start is about half a second of CPU (imports, the IPython shell, registration). When a
host starts more ranks than it has cores, all of them at once thrash: measured at 128 ranks on 2
cores, each took 0.86 s of CPU instead of 0.45 s. So at most one rank per core goes through that
phase at a time, the others wait on a per-host slot (an flock: released by the kernel even if the
holder dies). Hosts with a core per rank never wait.
"""
from __future__ import annotations

import fcntl
import os
import sys
import tempfile
import time

from .identity import launcher_rank

PROGRAM = "mlp_magic.engine.main"   # python -m PROGRAM: what identifies an engine of ours
LOG_FORMAT = "%(asctime)s.%(msecs).03d [rank {rank}] [%(name)s]%(highlevel)s %(message)s"
SLOT_POLL_S = 0.02


def engine_argv(argv: list, rank: int | None) -> list:
    """ipyparallel's engine arguments, plus the rank's id and log tag when it has a rank."""
    if rank is None:
        return list(argv)
    return [*argv, f"--IPEngine.id={rank}", f"--IPEngine.log_format={LOG_FORMAT.format(rank=rank)}"]


def slot_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def take_start_slot(rank: int | None, slots: int, folder: str | None = None):
    """Block until one of ``slots`` start slots on this host is ours; return its open file
    (closing it frees the slot). The rank picks its first slot, spreading the waits."""
    folder = folder or os.path.join(tempfile.gettempdir(), f"mlp_magic-start-slots-{os.getuid()}")
    os.makedirs(folder, exist_ok=True)
    handles = [open(os.path.join(folder, f"slot{i}"), "a") for i in range(slots)]
    first = (rank or 0) % slots
    try:
        while True:
            for offset in range(slots):
                handle = handles[(first + offset) % slots]
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue
                for other in handles:
                    if other is not handle:
                        other.close()
                return handle
            time.sleep(SLOT_POLL_S)
    except BaseException:
        for handle in handles:
            handle.close()
        raise


def quieten(kernel) -> None:
    """Publish only the iopub messages the client reads: per cell and rank, ipykernel sends
    'busy', the code back ('execute_input') and 'idle' around the output. The kernel ignores the
    first two (it sent the code, and only 'idle' completes a rank's output), yet the controller
    relays and inspects each, and the client parses each: at 128 ranks, 256 messages a cell."""
    if kernel is None:
        return
    publish_status = kernel._publish_status

    def idle_only(status, channel, parent=None):
        if status != "busy":
            publish_status(status, channel, parent)

    kernel._publish_status = idle_only
    kernel._publish_execute_input = lambda code, parent, execution_count: None


def main() -> None:
    rank = launcher_rank()
    slot = take_start_slot(rank, slot_count())
    sys.argv = [sys.argv[0], *engine_argv(sys.argv[1:], rank)]
    from ipyparallel.engine.app import IPEngine

    class RankEngine(IPEngine):
        async def register(self):
            try:
                await super().register()   # the reply, the shell, the first heartbeat
            finally:
                slot.close()
            quieten(self.kernel)

    RankEngine.launch_instance()


if __name__ == "__main__":
    main()
