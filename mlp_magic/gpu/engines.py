"""GPU inventories of a live World's hosts, through its engines (the lab panel, ``%mlp_cluster``).

The kernel sends ``gpu/probe.probe_on_engine`` to one engine on each host (its first rank), as a
host chore (engine/bootstrap.run_chore: its modules do not stay in the rank), all at once, then
waits for the answers as one RankJob (client/job, of the CHORE kind: woken by the replies
and the World's end, never by a clock) against one shared deadline: a host whose engine is busy
with a cell, wedged or gone is reported as "no answer within N s", never waited on past
``timeout``, and its queued probe is aborted. The ranks' states are not touched: a probe for
the panel is not the user's work.
"""
from __future__ import annotations

import time
from typing import Any
from collections.abc import Iterable, Mapping

from mlp_magic.core.placement import first_rank_per_host
from mlp_magic.engine.bootstrap import GPU_PROBE_CHORE, run_chore
from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu.pure.model import HostGpus, failed
from mlp_magic.client.job import CHORE, RankJob
from mlp_magic.client.remote_errors import one_line

# The engine gets this share of the timeout for its own probe, so that a slow driver on a
# host comes back as that host's own error message, before the kernel stops waiting.
ENGINE_SHARE = 0.5


def probe_targets(layout: Iterable[Any], rank_to_engine: Mapping[int, int]) -> dict[str, tuple[int, int]]:
    """host -> (rank, engine id) of the engine that probes it: its first rank
    (core/placement.first_rank_per_host). Hosts keep layout order. Ranks without an engine are
    skipped. Pure.
    """
    rows = [row for row in layout if rank_to_engine.get(row.rank) is not None]
    return {host: (rank, rank_to_engine[rank]) for host, rank in first_rank_per_host(rows).items()}


def collect_from_engines(world: Any, targets: Mapping[str, tuple[int, int]],
                         timeout: float = 5.0) -> dict[str, HostGpus]:
    """host -> HostGpus, asking engine ``targets[host] = (rank, engine id)`` of the World.

    All requests leave before any answer is awaited; the whole call returns within about
    ``timeout`` seconds however many hosts do not answer.
    """
    _check(timeout)
    deadline = time.monotonic() + timeout
    found: dict[str, HostGpus] = {}
    pending: dict[str, Any] = {}
    share = timeout * ENGINE_SHARE
    for host, (rank, engine_id) in targets.items():
        try:
            pending[host] = world.client[engine_id].apply_async(run_chore, GPU_PROBE_CHORE, share, host)
        except Exception as exc:  # unknown engine id, closed client
            found[host] = failed(host, "engine %d (rank %d): %s" % (engine_id, rank, one_line(exc)))
    hosts = list(pending)
    RankJob(world, CHORE, [targets[h][0] for h in hosts], [pending[h] for h in hosts]).wait_all(deadline)
    for host in hosts:
        rank, engine_id = targets[host]
        found[host] = _answer(host, rank, engine_id, pending[host], timeout, world.client)
    return {host: found[host] for host in targets}


def _answer(host: str, rank: int, engine_id: int, pending: Any, timeout: float, client: Any) -> HostGpus:
    """The HostGpus one engine sent, or why there is none."""
    if not pending.ready():
        try:  # drop the queued probe, so a busy engine does not pile them up across refreshes
            client.abort(pending, block=False)
        except Exception:
            pass  # the engine may be gone; the answer below says enough
        return failed(host, "no answer within %g s from engine %d (rank %d)" % (timeout, engine_id, rank))
    try:
        data = pending.get(0)
    except Exception as exc:  # a RemoteError or EngineError: the probe failed over there
        return failed(host, "engine %d (rank %d): %s" % (engine_id, rank, one_line(exc)))
    try:
        return HostGpus.from_dict(dict(data, host=host))
    except (MlpMagicError, TypeError, ValueError) as exc:
        return failed(host, "engine %d (rank %d) sent a bad inventory: %s" % (engine_id, rank, exc))


def collect_from_world(world: Any, timeout: float = 5.0, skip: Iterable[str] = ()) -> dict[str, HostGpus]:
    """host -> HostGpus for every host of a live World (``mpirun_command.current_world()``).

    ``skip``: hosts not to probe (their inventory is known already). A stopped World gives
    every host an error rather than raising.
    """
    _check(timeout)
    skipped = set(skip)
    targets = {host: target for host, target in probe_targets(world.layout, world.rank_to_engine).items()
               if host not in skipped}
    if world.client is None:
        return {host: failed(host, "the World is stopped") for host in targets}
    return collect_from_engines(world, targets, timeout)


def _check(timeout) -> None:
    if not timeout or timeout <= 0:
        raise MlpMagicError("GPU collect: timeout must be positive, got %r" % (timeout,))
