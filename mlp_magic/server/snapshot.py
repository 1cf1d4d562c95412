"""The cluster snapshot the lab panel shows: cluster's one model, as JSON, shared by every tab.

- ``panel_snapshots``: cluster's collector, asking what a panel polled every few seconds can
  afford (reachability, this machine's GPUs, the published Worlds: no ssh), run in a worker
  thread; the answer is ``ClusterState.to_json()``, the document ``mlp-magic status --json``
  prints too;
- ``SnapshotCache``: serves one encoded snapshot to every caller for a few seconds, and lets
  concurrent callers share the computation in flight, so N open tabs cost about one.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Awaitable, Callable, Mapping, Optional

from ..cluster.collect import CollectOptions, StateCollector
from ..cluster.reachability import DEFAULT_TIMEOUT

DEFAULT_CACHE_SECONDS = 4.0
DEFAULT_GPU_PROBE_TIMEOUT = 5.0


def panel_snapshots(hostfile: Optional[str] = None, probe_timeout: float = DEFAULT_TIMEOUT,
                    gpu_probe_timeout: float = DEFAULT_GPU_PROBE_TIMEOUT, env: Optional[Mapping] = None,
                    state_dir: Optional[str] = None) -> Callable[[], Awaitable[dict]]:
    """An async function giving one snapshot; the collecting runs off the server's event loop."""
    options = CollectOptions(hostfile=hostfile or None, gpus="local", timeout=gpu_probe_timeout,
                             reach_timeout=probe_timeout, env=env, state_dir=state_dir, published_gpus=True)
    collect = StateCollector(options)

    async def snapshot() -> dict:
        state = await asyncio.get_running_loop().run_in_executor(None, collect)
        return state.to_json()

    return snapshot


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
