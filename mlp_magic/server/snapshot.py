"""The cluster snapshot the lab panel shows: topology, reachability, GPUs and live Worlds.

Three parts, each with one job:
- pure assembly (``topology_json``, ``build_snapshot``): values in, one JSON-able dict out;
- ``SnapshotCollector``: the I/O (topology, probes, GPU inventory, World files);
- ``SnapshotCache``: serves one encoded snapshot to every caller for a few seconds, and lets
  concurrent callers share the computation in flight, so N open tabs cost about one.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import datetime, timezone
from typing import Awaitable, Callable, Iterable, Optional

from ..errors import MlpMagicError
from .reachability import DEFAULT_TIMEOUT, local_host_names, probe_hosts

DEFAULT_CACHE_SECONDS = 4.0
DEFAULT_GPU_PROBE_TIMEOUT = 5.0


# ---------------------------------------------------------------------------------------------
# Pure assembly

def topology_json(topology) -> dict:
    """The topology with each host's ranks laid out for a full job (every slot one rank)."""
    ranks = topology.layout(topology.total_slots) if topology.total_slots else []
    ranks_by_host: dict = {}
    for rank in ranks:
        ranks_by_host.setdefault(rank.host, []).append(rank.rank)
    return {
        "source": topology.source,
        "master_addr": topology.master_addr,
        "is_local": topology.is_local,
        "total_slots": topology.total_slots,
        "hosts": [
            {"name": host.name, "slots": host.slots, "index": host.index,
             "ranks": ranks_by_host.get(host.name, [])}
            for host in topology.hosts
        ],
    }


def host_key(name: str, local_names: Iterable[str]) -> str:
    """The names of this machine ("localhost", 127.0.0.1, its hostname) all mean one host.
    Other loopback addresses stay apart: tests and namespaces use them as separate hosts."""
    return "<local>" if name.lower() in local_names else name.lower()


def engines_by_host(worlds: list, local_names: Iterable[str]) -> dict:
    """Every published engine, grouped under its host key, ordered by rank."""
    grouped: dict = {}
    for world in worlds:
        for rank in world.get("ranks") or []:
            if not isinstance(rank, dict) or not isinstance(rank.get("host"), str):
                continue
            engine = {
                "rank": rank.get("rank"),
                "engine_id": rank.get("engine_id"),
                "state": rank.get("state"),
                "world_pid": world.get("pid"),
            }
            grouped.setdefault(host_key(rank["host"], local_names), []).append(engine)
    for engines in grouped.values():
        engines.sort(key=lambda engine: (engine["rank"] is None, engine["rank"] or 0))
    return grouped


def published_gpus(worlds: list, local_names: Iterable[str]) -> dict:
    """GPU inventories a World chose to publish (optional ``"gpus": {host: HostGpus dict}``)."""
    found: dict = {}
    for world in worlds:
        inventories = world.get("gpus")
        if not isinstance(inventories, dict):
            continue
        for host, inventory in inventories.items():
            gpus = inventory.get("gpus") if isinstance(inventory, dict) else inventory
            if isinstance(gpus, list):
                found[host_key(str(host), local_names)] = gpus
    return found


def build_snapshot(
    topology: Optional[dict],
    reachability: dict,
    local_gpus: Optional[dict],
    worlds: list,
    updated_at: str,
    local_names: Iterable[str],
    error: Optional[str] = None,
) -> dict:
    """One snapshot: ``topology`` from ``topology_json``, ``reachability`` name -> Reachability,
    ``local_gpus`` the HostGpus dict of this machine (None when not probed)."""
    engines = engines_by_host(worlds, local_names)
    gpus_by_host = published_gpus(worlds, local_names)
    if local_gpus is not None:
        gpus_by_host["<local>"] = local_gpus.get("gpus") or []
    hosts = []
    for host in (topology or {}).get("hosts", []):
        key = host_key(host["name"], local_names)
        probe = reachability.get(host["name"])
        hosts.append({
            "name": host["name"],
            "reachable": probe.reachable if probe else None,
            "probe_ms": probe.probe_ms if probe else None,
            "error": probe.error if probe else None,
            "gpus": gpus_by_host.get(key, []),
            "engines": engines.get(key, []),
        })
    return {
        "topology": topology,
        "hosts": hosts,
        "worlds": worlds,
        "gpu_source": (local_gpus or {}).get("source"),
        "gpu_error": (local_gpus or {}).get("error"),
        "error": error,
        "updated_at": updated_at,
    }


# ---------------------------------------------------------------------------------------------
# I/O

def _utc_now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _probe_local_gpus(timeout: float) -> dict:
    """This machine's GPU inventory as a dict; source "none" when nothing can be probed."""
    try:
        from ..gpu import probe_local
    except ImportError as error:  # GPU probing not installed in this build
        return {"source": "none", "gpus": [], "error": f"GPU probing unavailable: {error}"}
    inventory = probe_local(timeout=timeout)
    if hasattr(inventory, "to_dict"):
        return inventory.to_dict()
    as_json = inventory.to_json()
    return json.loads(as_json) if isinstance(as_json, str) else as_json


class SnapshotCollector:
    """Gathers one snapshot from the server's environment (blocking parts run in threads)."""

    def __init__(
        self,
        hostfile: Optional[str] = None,
        probe_timeout: float = DEFAULT_TIMEOUT,
        gpu_probe_timeout: float = DEFAULT_GPU_PROBE_TIMEOUT,
        env: Optional[dict] = None,
        state_dir: Optional[str] = None,
    ):
        self.hostfile = hostfile or None
        self.probe_timeout = probe_timeout
        self.gpu_probe_timeout = gpu_probe_timeout
        self.env = env
        self.state_dir = state_dir

    def read_topology(self):
        from ..topology import topology_from_environment

        env = os.environ if self.env is None else self.env
        return topology_from_environment(env, hostfile=self.hostfile)

    def read_worlds(self) -> list:
        from ..world_state import read_worlds

        return read_worlds(self.state_dir)

    async def collect(self) -> dict:
        loop = asyncio.get_running_loop()
        local_names = local_host_names()
        gpus_future = loop.run_in_executor(None, _probe_local_gpus, self.gpu_probe_timeout)
        worlds_future = loop.run_in_executor(None, self.read_worlds)
        topology, error, reachability = None, None, {}
        try:
            topo = self.read_topology()
            topology = topology_json(topo)
            reachability = await probe_hosts(topo.hosts, self.probe_timeout, local_names)
        except MlpMagicError as problem:
            error = str(problem)
        local_gpus = await _bounded(gpus_future, self.gpu_probe_timeout + 1.0)
        worlds = await worlds_future
        return build_snapshot(topology, reachability, local_gpus, worlds, _utc_now_iso(), local_names, error)


async def _bounded(future, timeout: float) -> Optional[dict]:
    """The GPU probe's answer, or a "none" inventory naming what went wrong."""
    try:
        return await asyncio.wait_for(future, timeout)
    except asyncio.TimeoutError:
        return {"source": "none", "gpus": [], "error": f"GPU probe gave no answer within {timeout:g} s"}
    except Exception as error:  # a broken driver must not take the whole panel down
        return {"source": "none", "gpus": [], "error": f"GPU probe failed: {error}"}


class SnapshotCache:
    """Caches the encoded snapshot for ``ttl`` seconds; concurrent misses share one computation.

    ``invalidate`` forgets the cached snapshot and any computation already running, so the next
    ``get`` starts afresh (a computation that began before a refresh may hold stale data).
    """

    def __init__(self, compute: Callable[[], Awaitable[dict]], ttl: float = DEFAULT_CACHE_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self._compute = compute
        self.ttl = ttl
        self._clock = clock
        self._body: Optional[str] = None
        self._taken_at = 0.0
        self._in_flight: Optional[asyncio.Future] = None
        self._generation = 0
        self.computations = 0  # how many snapshots were really computed (for tests, benchmarks)

    def invalidate(self) -> None:
        self._generation += 1
        self._body = None
        self._in_flight = None

    async def get(self) -> str:
        if self._body is not None and self._clock() - self._taken_at < self.ttl:
            return self._body
        if self._in_flight is None:
            self._in_flight = asyncio.ensure_future(self._refresh(self._generation))
        # shield: one impatient client going away must not cancel the others' computation
        return await asyncio.shield(self._in_flight)

    async def _refresh(self, generation: int) -> str:
        self.computations += 1
        try:
            body = json.dumps(await self._compute())
        finally:
            if generation == self._generation:
                self._in_flight = None
        if generation == self._generation:
            self._body, self._taken_at = body, self._clock()
        return body
