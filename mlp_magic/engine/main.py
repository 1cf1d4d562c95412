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
import socket
import sys

from .identity import launcher_rank, usable_cpus
from .quiet import quieten

PROGRAM = "mlp_magic.engine.main"   # python -m PROGRAM: what identifies an engine of ours
LOG_FORMAT = "%(asctime)s.%(msecs).03d [rank {rank}] [%(name)s]%(highlevel)s %(message)s"


def engine_argv(argv: list, rank: int | None) -> list:
    """ipyparallel's engine arguments, plus the rank's id and log tag when it has a rank."""
    if rank is None:
        return list(argv)
    return [*argv, f"--IPEngine.id={rank}", f"--IPEngine.log_format={LOG_FORMAT.format(rank=rank)}"]


def slot_names() -> list:
    """One slot per CPU this rank may run on: ranks bound to distinct cores never wait for each
    other, ranks sharing the machine's CPUs share their slots."""
    return [f"cpu{cpu}" for cpu in usable_cpus()]


def slot_folder() -> str:
    """Host-local (tmpfs where there is one, never a shared $TMPDIR): slots are this host's cores."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else "/tmp"
    return os.path.join(base, f"mlp_magic-start-slots-{os.getuid()}-{socket.gethostname()}")


def take_start_slot(rank: int | None, names: list, folder: str | None = None):
    """Block until one of this host's start slots is ours; return its open file (closing it
    frees the slot), or None where slots cannot work (no flock on that file system, a folder we
    may not write): the rank then starts at once, as it would without slots."""
    try:
        folder = folder or slot_folder()
        os.makedirs(folder, exist_ok=True)
        handles = [open(os.path.join(folder, name), "a") for name in names]
    except OSError:
        return None
    first = (rank or 0) % len(handles)
    try:
        taken = _free_slot(handles, first)
        if taken is None:
            # All busy: wait in the kernel on this rank's own slot (ranks spread over the slots
            # by number), woken the moment it frees; polling 128 waiting ranks cost CPU the
            # starting ones need.
            taken = handles[first]
            fcntl.flock(taken, fcntl.LOCK_EX)
    except OSError:     # ENOLCK, ENOSYS...: flock does not work here
        taken = None
    except BaseException:
        for handle in handles:
            handle.close()
        raise
    for handle in handles:
        if handle is not taken:
            handle.close()
    return taken


def _free_slot(handles: list, first: int):
    """A slot nobody holds right now, trying this rank's own first; None when all are taken."""
    for offset in range(len(handles)):
        handle = handles[(first + offset) % len(handles)]
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue   # taken: another rank is starting on that core
        return handle
    return None


def main() -> None:
    rank = launcher_rank()
    slot = take_start_slot(rank, slot_names())
    sys.argv = [sys.argv[0], *engine_argv(sys.argv[1:], rank)]
    from ipyparallel.engine.app import IPEngine

    class RankEngine(IPEngine):
        async def register(self):
            try:
                await super().register()   # the reply, the shell, the first heartbeat
            finally:
                if slot is not None:
                    slot.close()
            quieten(self.kernel)

    RankEngine.launch_instance()


if __name__ == "__main__":
    main()
