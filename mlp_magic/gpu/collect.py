"""GPU inventories of every host of a live World, one engine per host, in parallel.

The kernel sends ``probe_on_engine`` to one engine on each host (the one with LOCAL_RANK 0)
all at once, then waits for the answers against one shared deadline: a host whose engine
is busy with a cell, wedged or gone is reported as "no answer within N s", never waited on
past ``timeout``. The World object is only read (``layout``, ``rank_to_engine``, ``client``),
so nothing here imports ipyparallel.
"""
from __future__ import annotations

import time
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

from ..errors import MlpMagicError
from .model import HostGpus

# The engine gets this share of the timeout for its own probe, so that a slow driver on a
# host comes back as that host's own error message, before the kernel stops waiting.
ENGINE_SHARE = 0.5


def probe_on_engine(timeout: float, host: str) -> Dict[str, Any]:
    """Runs on an engine: this host's GPUs as plain data (no pickled classes cross the wire)."""
    from .probe import probe_local

    return probe_local(timeout=timeout, host=host).to_dict()


def probe_targets(layout: Iterable[Any], rank_to_engine: Mapping[int, int]) -> Dict[str, Tuple[int, int]]:
    """host -> (rank, engine id) of the engine that probes it: LOCAL_RANK 0, else the lowest rank.

    ``layout``: topology.Rank rows (``.rank``, ``.host``, ``.local_rank``). Hosts keep layout
    order. Ranks without an engine are skipped. Pure.
    """
    chosen: Dict[str, Tuple[int, int, int]] = {}
    for row in layout:
        engine_id = rank_to_engine.get(row.rank)
        if engine_id is None:
            continue
        best = chosen.get(row.host)
        if best is None or (row.local_rank, row.rank) < (best[0], best[1]):
            chosen[row.host] = (row.local_rank, row.rank, engine_id)
    return {host: (rank, engine_id) for host, (_, rank, engine_id) in chosen.items()}


def _failed(host: str, error: str) -> HostGpus:
    return HostGpus(host=host, source="none", error=error)


def _answer(host: str, rank: int, engine_id: int, pending: Any, seconds_left: float, timeout: float,
            client: Any) -> HostGpus:
    """The HostGpus one engine sent, or why there is none."""
    if not pending.wait(max(0.0, seconds_left)):
        try:  # drop the queued probe, so a busy engine does not pile them up across refreshes
            client.abort(pending, block=False)
        except Exception:
            pass  # the engine may be gone; the answer below says enough
        return _failed(host, "no answer within %g s from engine %d (rank %d)" % (timeout, engine_id, rank))
    try:
        data = pending.get(0)
    except Exception as exc:  # a RemoteError or EngineError: the probe failed over there
        return _failed(host, "engine %d (rank %d): %s" % (engine_id, rank, _one_line(exc)))
    try:
        return HostGpus.from_dict(dict(data, host=host))
    except (MlpMagicError, TypeError, ValueError) as exc:
        return _failed(host, "engine %d (rank %d) sent a bad inventory: %s" % (engine_id, rank, exc))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0]) if text else type(exc).__name__


def collect_from_engines(client: Any, targets: Mapping[str, Tuple[int, int]],
                         timeout: float = 5.0) -> Dict[str, HostGpus]:
    """host -> HostGpus, asking engine ``targets[host] = (rank, engine id)`` of an ipyparallel Client.

    All requests leave before any answer is awaited; the whole call returns within about
    ``timeout`` seconds however many hosts do not answer.
    """
    if not timeout or timeout <= 0:
        raise MlpMagicError("GPU collect: timeout must be positive, got %r" % (timeout,))
    deadline = time.monotonic() + timeout
    found: Dict[str, HostGpus] = {}
    pending: Dict[str, Any] = {}
    for host, (rank, engine_id) in targets.items():
        try:
            pending[host] = client[engine_id].apply_async(probe_on_engine, timeout * ENGINE_SHARE, host)
        except Exception as exc:  # unknown engine id, closed client
            found[host] = _failed(host, "engine %d (rank %d): %s" % (engine_id, rank, _one_line(exc)))
    for host, result in pending.items():
        rank, engine_id = targets[host]
        found[host] = _answer(host, rank, engine_id, result, deadline - time.monotonic(), timeout, client)
    return {host: found[host] for host in targets}


def collect_from_world(world: Any, timeout: float = 5.0, skip: Iterable[str] = ()) -> Dict[str, HostGpus]:
    """host -> HostGpus for every host of a live World (``mpirun_command.current_world()``).

    ``skip``: hosts not to probe (their inventory is known already). A stopped World gives
    every host an error rather than raising.
    """
    if not timeout or timeout <= 0:
        raise MlpMagicError("GPU collect: timeout must be positive, got %r" % (timeout,))
    skipped = set(skip)
    targets = {host: target for host, target in probe_targets(world.layout, world.rank_to_engine).items()
               if host not in skipped}
    client: Optional[Any] = world.client
    if client is None:
        return {host: _failed(host, "the World is stopped") for host in targets}
    return collect_from_engines(client, targets, timeout)
