"""Where the ranks go: hosts, slots, rank layout and master address (pure).

``topology_of`` reads, in this order: explicit options (``hostfile=``, ``hosts=``), the ML
platform's MLP_* variables, Azure/torchrun variables, Slurm, and finally the local machine (the
embedded default). What it needs of the machine it is given: the environment, a reader of the
named hostfile, the local slot count (called only for the embedded default) and this machine's
names; ``machine/topology.topology_from_environment`` gives it this machine's.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from mlp_magic.errors import MlpMagicError
from mlp_magic.core.hostfile import (LOCALHOST, LOOPBACK, MAX_PORT, MAX_SLOTS, HostEntry, check_host_name,
                                     expand_names, parse_count, parse_host_list, parse_hostfile,
                                     reject_duplicates, split_outside_brackets)
from mlp_magic.core.ranges import MAX_HOSTS, MAX_RANKS, quote
from mlp_magic.core.records import Record

LOCAL_SOURCE = "local machine"   # the embedded default, the one source that oversubscribes unasked


class Host(Record, frozen=True):
    name: str
    slots: int
    index: int               # NODE_RANK: position in the host list
    port: int | None = None  # ssh port when not the default
    user: str | None = None


class Rank(Record, frozen=True):
    rank: int
    host: str
    node_rank: int
    local_rank: int
    local_world_size: int


class Topology(Record, frozen=True):
    hosts: tuple
    source: str              # where it came from, for messages ("hostfile /etc/x", "local machine")
    master_addr: str
    is_local: bool = False   # every rank on this machine
    master_port: int | None = None

    @property
    def total_slots(self) -> int:
        return sum(host.slots for host in self.hosts)

    def host_names(self) -> list:
        return [host.name for host in self.hosts]

    def ranks_per_host(self, np: int, oversubscribe: bool = False) -> list:
        """How many ranks each host gets: fill slots host by host, like ``--map-by slot``.

        More ranks than slots is refused unless ``oversubscribe`` or this is the embedded local
        default (whose slot count is only a guess: GPUs, else cores).
        """
        if isinstance(np, bool) or not isinstance(np, int) or np <= 0:
            raise MlpMagicError(f"-np must be a positive integer, got {np!r}")
        if np > MAX_RANKS:
            raise MlpMagicError(f"-np {np} is more than the {MAX_RANKS} ranks mlp_magic can lay out")
        total = self.total_slots
        if total <= 0:
            raise MlpMagicError(f"{self.source} has no slots to put ranks on")
        if np > total and not (oversubscribe or self.source == LOCAL_SOURCE):
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
        # Oversubscribed: whole rounds of every host's slots first, then the rest host by host.
        rounds, left = divmod(left, total)
        counts = [count + rounds * host.slots for count, host in zip(counts, self.hosts)]
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
# Values of environment variables.

def _text(env: Mapping, name: str) -> str:
    value = env.get(name)
    return "" if value is None else str(value).strip()


def _int_var(env: Mapping, name: str, limit: int = MAX_SLOTS) -> int | None:
    """A non-negative integer variable; None when unset or empty."""
    value = _text(env, name)
    return parse_count(value, f"${name}", limit, least=0) if value else None


def _host_var(env: Mapping, name: str) -> str:
    value = _text(env, name)
    return check_host_name(value, f"${name}") if value else ""


def _name_list(env: Mapping, name: str) -> list:
    """A comma list of host names (node sets allowed), each checked."""
    names = []
    for item in split_outside_brackets(_text(env, name)):
        item = item.strip()
        if item:
            names += expand_names(item, f"${name}")
    if len(names) > MAX_HOSTS:
        raise MlpMagicError(f"${name} names more than {MAX_HOSTS} hosts")
    return names


def _from_options(hostfile, hosts, read_text) -> tuple | None:
    if hostfile is not None and hosts is not None:
        raise MlpMagicError("give either --hostfile or -H, not both")
    if hostfile is not None:
        if not str(hostfile).strip():
            raise MlpMagicError("--hostfile: empty path")
        source = f"hostfile {hostfile}"
        return parse_hostfile(read_text(hostfile, "--hostfile"), source), source
    if hosts is not None:
        return parse_host_list(hosts, "-H"), f"-H {hosts}"
    return None


def naming_errors(reader: Callable[[str], str]) -> Callable[[str, str], str]:
    """``reader(path)`` (a hostfile's text) as ``topology_of`` reads a hostfile: ``(path, what)``,
    its errors one MlpMagicError naming ``what`` (the option or variable) and the path."""
    def read(path: str, what: str) -> str:
        try:
            return reader(path)
        except FileNotFoundError:
            raise MlpMagicError(f"{what}: no such file {quote(path)}") from None
        except IsADirectoryError:
            raise MlpMagicError(f"{what}: {quote(path)} is a directory, not a hostfile") from None
        except UnicodeDecodeError as err:
            raise MlpMagicError(f"{what}: {quote(path)} is not UTF-8 text "
                                f"({err.reason} at byte {err.start})") from None
        except (OSError, ValueError) as err:  # ValueError: a NUL byte in the path
            raise MlpMagicError(f"{what}: cannot read {quote(path)}: {err}") from None
    return read


def _from_mlp(env: Mapping, read_text) -> tuple | None:
    path = _text(env, "MLP_MPI_HOSTFILE")
    if path:
        text = read_text(path, "$MLP_MPI_HOSTFILE")
        entries = parse_hostfile(text, f"hostfile {path} (from $MLP_MPI_HOSTFILE)")
        return entries, f"$MLP_MPI_HOSTFILE ({path})"
    if _text(env, "MLP_MPI_HOSTS"):
        return parse_host_list(_text(env, "MLP_MPI_HOSTS"), "$MLP_MPI_HOSTS"), "$MLP_MPI_HOSTS"
    listed = _name_list(env, "MLP_WORKER_ALL_HOSTS")
    workers = _int_var(env, "MLP_WORKER_NUM", MAX_HOSTS)
    if not workers and not listed:
        return None  # MLP_WORKER_NUM=0 or unset: not a platform job
    if workers and listed and len(listed) != workers:
        raise MlpMagicError(
            f"$MLP_WORKER_ALL_HOSTS names {len(listed)} hosts ({quote(_text(env, 'MLP_WORKER_ALL_HOSTS'))}) "
            f"but $MLP_WORKER_NUM is {workers}"
        )
    slots = _int_var(env, "MLP_WORKER_GPU") or 1  # CPU instances run one process per worker
    names = _worker_names(env, workers or len(listed), listed)
    return [HostEntry(name, slots, line=i + 1) for i, name in enumerate(names)], "$MLP_WORKER_NUM"


def _worker_names(env: Mapping, workers: int, listed: list) -> list:
    """MLP_WORKER_{i}_HOST, else the i-th of MLP_WORKER_ALL_HOSTS, else ``worker{i}``."""
    return [_host_var(env, f"MLP_WORKER_{i}_HOST") or (listed[i] if listed else f"worker{i}")
            for i in range(workers)]


def _from_azure_torchrun(env: Mapping) -> tuple | None:
    per_node = _int_var(env, "LOCAL_WORLD_SIZE")
    world = _int_var(env, "WORLD_SIZE", MAX_RANKS)
    names = _name_list(env, "AZ_BATCH_HOST_LIST")
    if names:
        return [HostEntry(name, _azure_slots(per_node, world, names), line=i + 1)
                for i, name in enumerate(names)], "$AZ_BATCH_HOST_LIST"
    if world and per_node and world == per_node:
        # A single-node torchrun job: its ranks are all on this machine.
        return [HostEntry(LOCALHOST, world, line=1)], "$WORLD_SIZE (single node)"
    return None


def _azure_slots(per_node: int | None, world: int | None, names: list) -> int:
    if per_node and world and per_node * len(names) != world:
        raise MlpMagicError(f"$WORLD_SIZE {world} is not $LOCAL_WORLD_SIZE {per_node} x "
                            f"{len(names)} hosts of $AZ_BATCH_HOST_LIST")
    if per_node:
        return per_node
    if world:
        if world % len(names):
            raise MlpMagicError(f"$WORLD_SIZE {world} does not divide among the {len(names)} hosts "
                                "of $AZ_BATCH_HOST_LIST")
        return world // len(names)
    return 1


_SLURM_TASKS = re.compile(r"([0-9]{1,9})(?:\(x([0-9]{1,9})\))?")


def _slurm_tasks_per_node(spec: str, nodes: int, variable: str) -> list:
    """``8(x2),4`` -> [8, 8, 4]."""
    counts: list = []
    for part in spec.split(","):
        match = _SLURM_TASKS.fullmatch(part.strip())
        count, repeat = (int(match.group(1)), int(match.group(2) or 1)) if match else (0, 0)
        if not 0 < count <= MAX_SLOTS or not repeat:
            raise MlpMagicError(f"${variable}: cannot read {quote(part)} in {quote(spec)} "
                                "(expected positive counts like 8(x2),4)")
        if len(counts) + repeat > nodes:
            raise MlpMagicError(f"${variable} {quote(spec)} counts more than the {nodes} nodes")
        counts += [count] * repeat
    if len(counts) == 1:
        counts *= nodes
    if len(counts) != nodes:
        raise MlpMagicError(f"${variable} {quote(spec)} does not match {nodes} nodes")
    return counts


def _from_slurm(env: Mapping) -> tuple | None:
    variable = "SLURM_JOB_NODELIST" if _text(env, "SLURM_JOB_NODELIST") else "SLURM_NODELIST"
    if not _text(env, variable):
        return None
    names = _name_list(env, variable)
    if not names:
        raise MlpMagicError(f"${variable} {quote(_text(env, variable))} names no hosts")
    tasks = "SLURM_TASKS_PER_NODE" if _text(env, "SLURM_TASKS_PER_NODE") else "SLURM_NTASKS_PER_NODE"
    counts = _slurm_tasks_per_node(_text(env, tasks) or "1", len(names), tasks)
    return [HostEntry(n, c, line=i + 1) for i, (n, c) in enumerate(zip(names, counts))], f"${variable}"


# ---------------------------------------------------------------------------------------------
# Master address and port.

def _master_addr(env: Mapping, source: str, names: list, is_local: bool) -> str:
    """Rank 0's host, as the platform names it when the hosts came from the platform."""
    if is_local:
        return LOOPBACK
    if source.startswith("$MLP_"):
        worker0 = _host_var(env, "MLP_WORKER_0_HOST")
        # MLP_WORKER_0_HOST is worker0's reachable address; it is rank 0's host unless the list
        # puts another known host first (e.g. ordered by rack).
        if worker0 and (worker0 == names[0] or worker0 not in names):
            return worker0
    if source == "$AZ_BATCH_HOST_LIST":
        return _host_var(env, "MASTER_ADDR") or names[0]
    return names[0]


def _master_port(env: Mapping, source: str) -> int | None:
    variables = ("MLP_WORKER_0_PORT", "MASTER_PORT") if source.startswith("$MLP_") else ("MASTER_PORT",)
    for name in variables:
        port = _int_var(env, name, MAX_PORT)
        if port:
            return port
    return None


# ---------------------------------------------------------------------------------------------
# The whole.

def topology_of(
    env: Mapping,
    *,
    hostfile: str | None,
    hosts: str | None,
    read_text: Callable[[str, str], str],
    local_slots: Callable[[], int],
    local_names: frozenset,
) -> Topology:
    """The Topology the options and the environment ``env`` describe. ``read_text(path, what)``:
    a hostfile's text, its errors one MlpMagicError naming ``what`` (``naming_errors`` makes one
    of a plain reader); ``local_slots()``: the embedded default's slots; ``local_names``: this
    machine's names, lower case: a topology of one of them alone is local."""
    found = (
        _from_options(hostfile, hosts, read_text)
        or _from_mlp(env, read_text)
        or _from_azure_torchrun(env)
        or _from_slurm(env)
    )
    if found is None:
        entries, source = [HostEntry(LOCALHOST, max(1, local_slots()), line=1)], LOCAL_SOURCE
    else:
        entries, source = found
        reject_duplicates(((e.name, e.line) for e in entries), source, units="entries")
    is_local = len(entries) == 1 and entries[0].name.lower() in local_names
    host_objects = tuple(Host(e.name, e.slots, index, e.port, e.user) for index, e in enumerate(entries))
    return Topology(
        hosts=host_objects,
        source=source,
        master_addr=_master_addr(env, source, [h.name for h in host_objects], is_local),
        is_local=is_local,
        master_port=_master_port(env, source),
    )
