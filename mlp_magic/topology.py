"""Where the ranks go: hosts, slots, rank layout and master address (pure).

``topology_from_environment`` reads, in this order: explicit options (``hostfile=``, ``hosts=``),
the ML platform's MLP_* variables, Azure/torchrun variables, Slurm, and finally the local machine
(the embedded default). The only I/O is reading the named hostfile and counting the local
GPUs/CPUs, both done through injectable callables so the logic stays testable.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable, Mapping

from .errors import MlpMagicError
from .hostfile import HostEntry, check_host_name, parse_host_list, parse_hostfile, split_outside_brackets

LOCAL_HOST = "localhost"
LOCAL_ADDR = "127.0.0.1"


@dataclass(frozen=True)
class Host:
    name: str
    slots: int
    index: int               # NODE_RANK: position in the host list
    port: int | None = None  # ssh port when not the default
    user: str | None = None


@dataclass(frozen=True)
class Rank:
    rank: int
    host: str
    node_rank: int
    local_rank: int
    local_world_size: int


@dataclass(frozen=True)
class Topology:
    hosts: tuple
    source: str              # where it came from, for messages ("hostfile /etc/x", "local machine")
    master_addr: str
    is_local: bool = False   # the embedded default: this machine only
    master_port: int | None = None

    @property
    def total_slots(self) -> int:
        return sum(host.slots for host in self.hosts)

    def host_names(self) -> list:
        return [host.name for host in self.hosts]

    def ranks_per_host(self, np: int, oversubscribe: bool = False) -> list:
        """How many ranks each host gets: fill slots host by host, like ``--map-by slot``."""
        if np <= 0:
            raise MlpMagicError(f"-np must be a positive integer, got {np}")
        total = self.total_slots
        if np > total and not (oversubscribe or self.is_local):
            raise MlpMagicError(
                f"-np {np} is more than the {total} slots of {self.source} "
                f"({', '.join(f'{h.name}:{h.slots}' for h in self.hosts)}); "
                "lower -np or pass --oversubscribe"
            )
        counts, left = [], np
        for host in self.hosts:
            take = min(host.slots, left)
            counts.append(take)
            left -= take
        # Oversubscribed: hand the extra ranks out in proportion to slots, whole rounds first.
        while left > 0:
            for i, host in enumerate(self.hosts):
                take = min(host.slots, left)
                counts[i] += take
                left -= take
        return counts

    def layout(self, np: int, oversubscribe: bool = False) -> list:
        ranks, next_rank = [], 0
        for host, count in zip(self.hosts, self.ranks_per_host(np, oversubscribe)):
            for local in range(count):
                ranks.append(Rank(next_rank, host.name, host.index, local, count))
                next_rank += 1
        return ranks


# ---------------------------------------------------------------------------------------------
# Sources, each returning (entries, source-description) or None when its variables are absent.

def _from_options(hostfile, hosts, read_text) -> tuple | None:
    if hostfile and hosts:
        raise MlpMagicError("give either --hostfile or -H, not both")
    if hostfile:
        return parse_hostfile(_read(hostfile, read_text, "--hostfile"), f"hostfile {hostfile}"), f"hostfile {hostfile}"
    if hosts is not None:
        return parse_host_list(hosts, "-H"), "-H " + hosts
    return None


def _read(path: str, read_text: Callable, what: str) -> str:
    try:
        return read_text(path)
    except FileNotFoundError:
        raise MlpMagicError(f"{what}: no such file {path!r}") from None
    except IsADirectoryError:
        raise MlpMagicError(f"{what}: {path!r} is a directory, not a hostfile") from None
    except (OSError, UnicodeDecodeError) as err:
        raise MlpMagicError(f"{what}: cannot read {path!r}: {err}") from None


def _int_var(env: Mapping, name: str) -> int | None:
    value = env.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise MlpMagicError(f"${name} must be a non-negative integer, got {value!r}")
    return int(value)


def _from_mlp(env: Mapping, read_text) -> tuple | None:
    if env.get("MLP_MPI_HOSTFILE"):
        path = env["MLP_MPI_HOSTFILE"]
        return parse_hostfile(_read(path, read_text, "$MLP_MPI_HOSTFILE"), f"hostfile {path}"), f"$MLP_MPI_HOSTFILE ({path})"
    if env.get("MLP_MPI_HOSTS"):
        return parse_host_list(env["MLP_MPI_HOSTS"], "$MLP_MPI_HOSTS"), "$MLP_MPI_HOSTS"
    workers = _int_var(env, "MLP_WORKER_NUM")
    if not workers:
        return None
    slots = _int_var(env, "MLP_WORKER_GPU") or 1  # CPU instances run one process per worker
    names = _worker_names(env, workers)
    return [HostEntry(name, slots, line=i + 1) for i, name in enumerate(names)], "$MLP_WORKER_NUM"


def _worker_names(env: Mapping, workers: int) -> list:
    listed = [h.strip() for h in env.get("MLP_WORKER_ALL_HOSTS", "").split(",") if h.strip()]
    if listed and len(listed) != workers:
        raise MlpMagicError(
            f"$MLP_WORKER_ALL_HOSTS names {len(listed)} hosts but $MLP_WORKER_NUM is {workers}"
        )
    names = [env.get(f"MLP_WORKER_{i}_HOST") or (listed[i] if listed else f"worker{i}") for i in range(workers)]
    for i, name in enumerate(names):
        check_host_name(name, f"$MLP_WORKER_{i}_HOST")
    return names


def _from_azure_torchrun(env: Mapping) -> tuple | None:
    per_node = _int_var(env, "LOCAL_WORLD_SIZE")
    world = _int_var(env, "WORLD_SIZE")
    if env.get("AZ_BATCH_HOST_LIST"):
        names = [h.strip() for h in env["AZ_BATCH_HOST_LIST"].split(",") if h.strip()]
        slots = per_node or (world // len(names) if world and names else 1) or 1
        entries = [HostEntry(check_host_name(n, "$AZ_BATCH_HOST_LIST"), slots, line=i + 1) for i, n in enumerate(names)]
        return entries, "$AZ_BATCH_HOST_LIST"
    if world and per_node and world == per_node:
        # A single-node torchrun job: its ranks are all on this machine.
        return [HostEntry(LOCAL_HOST, world, line=1)], "$WORLD_SIZE (single node)"
    return None


_SLURM_TASKS = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def _slurm_tasks_per_node(spec: str, nodes: int) -> list:
    """``8(x2),4`` -> [8, 8, 4]."""
    counts = []
    for part in spec.split(","):
        match = _SLURM_TASKS.match(part.strip())
        if not match:
            raise MlpMagicError(f"$SLURM_TASKS_PER_NODE: cannot read {part!r} in {spec!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    if len(counts) == 1:
        counts *= nodes
    if len(counts) != nodes:
        raise MlpMagicError(f"$SLURM_TASKS_PER_NODE {spec!r} does not match {nodes} nodes")
    return counts


def _from_slurm(env: Mapping) -> tuple | None:
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        return None
    from .ranges import expand_hosts

    names = []
    for item in split_outside_brackets(nodelist):
        names += expand_hosts(item.strip())
    spec = env.get("SLURM_TASKS_PER_NODE") or env.get("SLURM_NTASKS_PER_NODE") or "1"
    counts = _slurm_tasks_per_node(spec, len(names))
    return [HostEntry(n, c, line=i + 1) for i, (n, c) in enumerate(zip(names, counts))], "$SLURM_JOB_NODELIST"


def _master_addr(env: Mapping, first_host: str, is_local: bool) -> str:
    if is_local:
        return LOCAL_ADDR
    return env.get("MLP_WORKER_0_HOST") or first_host


def _master_port(env: Mapping) -> int | None:
    for name in ("MLP_WORKER_0_PORT", "MASTER_PORT"):
        port = _int_var(env, name)
        if port:
            if port > 65535:
                raise MlpMagicError(f"${name} {port} is above 65535")
            return port
    return None


def local_slot_count(gpu_count: Callable[[], int] | None = None) -> int:
    """Slots of the embedded default: one per GPU, else one per CPU core."""
    gpus = gpu_count() if gpu_count else count_local_gpus()
    return gpus or (os.cpu_count() or 1)


def count_local_gpus() -> int:
    """NVIDIA device nodes are the cheapest honest count (no driver load, no subprocess)."""
    try:
        return sum(1 for name in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", name))
    except OSError:
        return 0


def _read_text_file(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def topology_from_environment(
    env: Mapping | None = None,
    *,
    hostfile: str | None = None,
    hosts: str | None = None,
    read_text: Callable[[str], str] = _read_text_file,
    local_slots: Callable[[], int] = local_slot_count,
) -> Topology:
    """Build the Topology the options and the environment describe."""
    env = os.environ if env is None else env
    found = (
        _from_options(hostfile, hosts, read_text)
        or _from_mlp(env, read_text)
        or _from_azure_torchrun(env)
        or _from_slurm(env)
    )
    if found is None:
        entries, source, is_local = [HostEntry(LOCAL_HOST, local_slots(), line=1)], "local machine", True
    else:
        (entries, source), is_local = found, False
        is_local = all(entry.name in (LOCAL_HOST, LOCAL_ADDR) for entry in entries) and len(entries) == 1
    host_objects = tuple(
        Host(e.name, e.slots, index, e.port, e.user) for index, e in enumerate(entries)
    )
    return Topology(
        hosts=host_objects,
        source=source,
        master_addr=_master_addr(env, host_objects[0].name, is_local),
        is_local=is_local,
        master_port=_master_port(env),
    )
