"""Who a rank is, asked once at World start: its MPI rank, host, pid and a few facts of its host.

The rank comes from the launcher's own variables (no MPI_Init needed), so engines can be mapped
to ranks before anything else runs; the kernel never assumes engine ids follow ranks.
"""
from __future__ import annotations

import os
import socket

from mlp_magic import config
from mlp_magic.engine import used_once

PROGRAM = "mlp_magic.engine.main"   # python -m PROGRAM: what identifies an engine of ours


def _rank_variables() -> tuple:
    """core/rank_variables' lists (its module is not held: used_once)."""
    from mlp_magic.core import rank_variables as names
    return names.OWN_RANK, names.MPI_LOCAL_RANK, names.WORLD_RANK, names.MPI_RANK


OWN_RANK, MPI_LOCAL_RANK, WORLD_RANK, MPI_RANK = used_once(_rank_variables)

# This engine's start, filled by engine/main: when it registered ("registered_at", epoch s), its
# CPU until then ("cpu_s"), what its lean start kept out. Set against "create_time", it is the
# per-engine start time benchmarks/engine_weight.py reports.
STARTED: dict = {}


def first_number(names: tuple) -> int | None:
    """The first of ``names`` this process's environment sets to a number."""
    for name in names:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return None


def launcher_rank() -> int | None:
    """This process's rank as its launcher numbered it; None outside a launcher."""
    return first_number(OWN_RANK)


def respawned() -> bool:
    """Whether ``%mpirun --respawn`` started this process for a dead rank (respawn/rank/mpi_join)."""
    return first_number(OWN_RANK[:1]) is not None


def launched_by_mpi() -> bool:
    """Whether an MPI launcher started this process (not a plain engine the World numbered)."""
    return not os.environ.get(WORLD_RANK) and first_number(MPI_RANK) is not None


def launcher_process() -> list | None:
    """[job, index]: how an Open MPI launcher's log names this process ("[prterun-vm-17@2,0]"),
    None elsewhere; a respawned rank's job is 2, 3... (world/rank_deaths)."""
    job = os.environ.get("PMIX_NAMESPACE", "").rpartition("@")[2]
    index = first_number(MPI_RANK)
    return [int(job), index] if job.isdigit() and index is not None else None


def identify(controller_ip: str = "127.0.0.1") -> dict:
    """Who am I: the MPI rank from the launcher's variables, and the address this host uses
    towards the controller (rank 0's is MASTER_ADDR)."""
    return {
        "rank": launcher_rank(),
        "launcher_local_rank": first_number(MPI_LOCAL_RANK),
        "launcher_process": launcher_process(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pgid": os.getpgrp(), "sid": os.getsid(0),   # what it forks keeps them (agent/leftovers)
        **dict(zip(("free_port", "tf_port"), free_ports(2))),   # MASTER_PORT's fallback, TF_CONFIG's
        "addr": route_source_ip(controller_ip) or socket.gethostname(),
        "stacks_path": stacks_path(),
        "collectives_path": collectives_path(),
        "create_time": _create_time(),
        "cpus": usable_cpus(),
        "started": dict(STARTED),
    }


def usable_cpus() -> list:
    """The CPUs this process may run on (its affinity: a container's or a launcher's binding),
    else all of the machine's."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def stacks_path(pid: int | None = None) -> str:
    """Where this engine's faulthandler writes its stacks when asked (SIGUSR1)."""
    return os.path.join(config.home(), "stacks", f"{pid or os.getpid()}.txt")


def collectives_path(pid: int | None = None, home: str | None = None) -> str:
    """Where an engine's recorder thread writes its collectives when asked (stacks/rank/recorder):
    this one's, or process ``pid``'s whose mlp_magic home is ``home``."""
    return os.path.join(home or config.home(), "stacks", f"{pid or os.getpid()}.collectives.json")


def route_source_ip(destination: str) -> str | None:
    """The local address the kernel would use to reach ``destination`` (nothing is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((destination, 9))
            return probe.getsockname()[0]
    except OSError:
        return None


def _create_time() -> float | None:
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:  # psutil comes with ipyparallel; without it, pids are trusted as they are
        return None


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list:
    """``count`` distinct ports free now (all bound at once: one after the other may repeat)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
