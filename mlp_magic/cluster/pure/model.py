"""The cluster picture every face shows: one ``ClusterState``, built from values only. Pure.

``cluster_state`` puts together a Topology, the hosts' ``HostGpus``, the Worlds kernels publish
and reachability; ``ClusterState.to_json()`` is the one JSON document (``mlp-magic status
--json`` prints it, the lab panel's ``GET /mlp-magic/cluster`` serves it). A new field on a host
row goes in ``HostView`` and ``HostView.to_json`` here, and in the panel's
``labextension/src/model/documents.ts`` (tests/unit/test_panel_samples.py ties the two); the
collector (``collect.py``) and the text/HTML faces follow.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping   # not typing's: isinstance on it is slower (once a rank a rebuild)
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Iterable, Sequence

from mlp_magic.core.proc_stat import process_id
from mlp_magic.gpu.pure.hints import host_hints
from mlp_magic.gpu.pure.model import HostGpus

LOCAL = "<local>"   # the key of this machine, whatever name a part used for it
PRIVATE = "private"  # the part of a published World record that is never shown


@dataclass(frozen=True)
class EngineInfo:
    rank: int | None
    engine_id: int | None
    state: str | None             # "idle" | "busy" | "dead" as the World publishes it
    world_pid: int | None = None  # the kernel whose World it belongs to

    def to_json(self) -> dict[str, Any]:
        """Which engines run here; their states are the World's (its "ranks"), said once there,
        so that a rank's change is one change of the document."""
        return {"rank": self.rank, "engine_id": self.engine_id, "world_pid": self.world_pid}


@dataclass
class HostView:
    name: str
    slots: int
    ranks: list[int]                 # the ranks a full job (every slot) places here
    reachable: bool | None        # None: not checked
    reach_error: str | None = None
    engines: list[EngineInfo] = field(default_factory=list)
    gpus: HostGpus | None = None  # None: not probed
    hints: list[str] = field(default_factory=list)
    probe_ms: float | None = None  # how long the reachability probe took
    index: int = 0                   # position in the host list (NODE_RANK)
    # the last mlp-magic doctor run (doctor/pure/report.health_by_host)
    health: dict[str, Any] | None = None

    @property
    def engine_summary(self) -> str:
        """"8 engines: 7 idle, 1 busy" or "no engines"."""
        if not self.engines:
            return "no engines"
        counts: dict[str, int] = {}
        for engine in self.engines:
            state = "?" if engine.state is None else engine.state
            counts[state] = counts.get(state, 0) + 1
        states = ", ".join("%d %s" % (n, s) for s, n in sorted(counts.items()))
        return "%d engine%s: %s" % (len(self.engines), "" if len(self.engines) == 1 else "s", states)

    def to_json(self) -> dict[str, Any]:
        """One host row of the JSON document (the first seven keys are ``status --json``'s)."""
        return {
            "name": self.name,
            "slots": self.slots,
            "ranks": list(self.ranks),
            "reachable": self.reachable,
            "error": self.reach_error,
            "gpus": gpus_json(self.gpus) if self.gpus is not None else None,
            "hints": list(self.hints),
            "index": self.index,
            "probe_ms": self.probe_ms,
            "engines": [engine.to_json() for engine in self.engines],
            "health": self.health,
        }


@dataclass
class ClusterState:
    source: str | None            # None with ``error``: no topology could be read
    master_addr: str | None
    total_slots: int
    hosts: list[HostView]
    updated_at: str = ""             # ISO 8601 (the collector's clock), or any text
    error: str | None = None
    is_local: bool = False           # every host is this machine
    worlds: list[Mapping] = field(default_factory=list)  # the World records shown

    def to_json(self) -> dict[str, Any]:
        """The one JSON document of the cluster (its first five keys are ``status --json``'s)."""
        return {
            "source": self.source,
            "master_addr": self.master_addr,
            "is_local": self.is_local,
            "total_slots": self.total_slots,
            "hosts": [host.to_json() for host in self.hosts],
            "updated_at": self.updated_at,
            "error": self.error,
            # a World's "private" part (its agents' key) stays on this machine, never served
            "worlds": [{k: v for k, v in world.items() if k != PRIVATE} for world in self.worlds],
        }


def gpus_json(gpus: HostGpus) -> dict[str, Any]:
    """One host's GPUs as JSON: the HostGpus fields except the host (its row or key names it)."""
    data = gpus.to_dict()
    del data["host"]
    return data


def host_key(name: str, local_names: frozenset) -> str:
    """All names of this machine ("localhost", its hostname, 127.0.0.1: ``local_names``, lower
    case) are one host; other loopback addresses stay apart (tests and namespaces use them as
    separate hosts)."""
    return LOCAL if name.lower() in local_names else name.lower()


def _number(value: Any) -> int | None:
    """A rank or engine id read from a World record, or None: a record holds what JSON allows
    (Infinity, a string, 10**40), and these are sorted and served to the panel as numbers."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 31
    return value if ok else None


def world_engines_by_key(worlds: Sequence[Mapping], local_names: frozenset) -> dict[str, list[EngineInfo]]:
    """Every engine the Worlds publish, under its host's key, ordered by rank."""
    found: dict[str, list[EngineInfo]] = {}
    keys: dict[str, str] = {}   # 512 ranks on 64 hosts: each host's key made once
    for world in worlds:
        ranks = world.get("ranks")
        for rank in ranks if isinstance(ranks, list) else []:
            if isinstance(rank, Mapping) and isinstance(rank.get("host"), str):
                state = rank.get("state")
                info = EngineInfo(_number(rank.get("rank")), _number(rank.get("engine_id")),
                                  None if state is None else str(state), process_id(world.get("pid")))
                host = rank["host"]
                if host not in keys:
                    keys[host] = host_key(host, local_names)
                found.setdefault(keys[host], []).append(info)
    for engines in found.values():
        engines.sort(key=lambda e: (e.rank is None, e.rank or 0))
    return found


def _reach(value: Any) -> tuple:
    """(reachable, error, probe_ms) from a Reachability, a bool, or None."""
    if value is None or isinstance(value, bool):
        return value, None, None
    return getattr(value, "reachable", None), getattr(value, "error", None), getattr(value, "probe_ms", None)


def cluster_state(topology: Any, inventories: Iterable[HostGpus] = (), worlds: Sequence[Mapping] = (),
                  reachability: Mapping[str, Any] | None = None, local_names: Iterable[str] = (),
                  updated_at: str = "", layout: Sequence[Any] | None = None) -> ClusterState:
    """The whole picture, from values only.

    ``topology``: a core.topology.Topology; ``inventories``: HostGpus whose ``host`` names a
    topology host (a later one for the same host wins); ``worlds``: published World records;
    ``reachability``: host name -> Reachability or bool; ``local_names``: this machine's names
    (machine/names.this_machine_names()); ``layout``: the ranks to show (a running World's),
    else those of a job on every slot.
    """
    names = frozenset(n.lower() for n in local_names)
    gpus_by_key = {host_key(g.host, names): g for g in inventories}
    engines = world_engines_by_key(worlds, names)
    ranks = list(layout) if layout is not None else _full_layout(topology)
    placed_on: dict[str, list] = {}
    for rank in ranks:
        placed_on.setdefault(rank.host, []).append(rank)
    hosts = []
    for host in topology.hosts:
        key = host_key(host.name, names)
        reachable, error, probe_ms = _reach((reachability or {}).get(host.name))
        placed = placed_on.get(host.name, [])
        gpus = gpus_by_key.get(key)
        hosts.append(HostView(
            name=host.name, slots=host.slots, ranks=[r.rank for r in placed], reachable=reachable,
            reach_error=error, engines=engines.get(key, []), gpus=gpus,
            hints=host_hints(gpus, placed) if gpus is not None else [], probe_ms=probe_ms, index=host.index,
        ))
    return ClusterState(source=topology.source, master_addr=topology.master_addr,
                        total_slots=topology.total_slots, hosts=hosts, updated_at=updated_at,
                        is_local=topology.is_local, worlds=list(worlds))


@functools.lru_cache(maxsize=8)   # the document is rebuilt at every change of a rank's state
def _full_layout(topology: Any) -> tuple:
    """The ranks of a job on every slot (shown when no running World says otherwise)."""
    return tuple(topology.layout(topology.total_slots)) if topology.total_slots else ()


def failed_state(error: str, updated_at: str = "", worlds: Sequence[Mapping] = ()) -> ClusterState:
    """No topology could be read: the reason, and the Worlds still running."""
    return ClusterState(source=None, master_addr=None, total_slots=0, hosts=[], updated_at=updated_at,
                        error=error, worlds=list(worlds))


def published_inventories(worlds: Sequence[Mapping]) -> list[HostGpus]:
    """The GPU inventories Worlds publish (``"gpus": {host: HostGpus dict}``); bad ones skipped."""
    found = []
    for world in worlds:
        inventories = world.get("gpus")
        if not isinstance(inventories, Mapping):
            continue
        for host, inventory in inventories.items():
            data = {"gpus": inventory} if isinstance(inventory, list) else inventory
            try:
                found.append(HostGpus.from_dict(dict(data, host=str(host))))
            except Exception:  # MlpMagicError, or not a mapping: another version's record
                continue
    return found
