"""Is a host reachable? A bounded TCP connect to its ssh port, many hosts at once.

A connect (no ssh handshake) is enough to tell "up and listening" from "refused",
"no route" and "silent", costs the host almost nothing and needs no credentials.
"""
from __future__ import annotations

import asyncio
import os
import socket
import time
from dataclasses import dataclass

from mlp_magic.machine.names import stays_here, this_machine_names

SSH_PORT = 22
DEFAULT_TIMEOUT = 1.0
MAX_CONCURRENT_PROBES = 64


@dataclass(frozen=True)
class Reachability:
    """The outcome of one probe. ``reachable`` is None when nothing was tried."""

    reachable: bool | None
    probe_ms: float | None
    error: str | None

    def to_json(self) -> dict:
        return {"reachable": self.reachable, "probe_ms": self.probe_ms, "error": self.error}


def needs_probe(name: str, port: int | None, local_names: frozenset) -> bool:
    """The machine we run on is reachable by definition, unless an explicit port asks for a
    particular listener there (e.g. an sshd of a test host)."""
    return not stays_here(name, port, local_names)


async def probe_tcp(name: str, port: int, timeout: float = DEFAULT_TIMEOUT) -> Reachability:
    """Connect to (name, port) and hang up; name resolution counts against the timeout."""
    started = time.perf_counter()
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(name, port), timeout)
    except asyncio.TimeoutError:
        return Reachability(False, _ms_since(started), f"no answer on port {port} within {timeout:g} s")
    except socket.gaierror as error:
        return Reachability(False, _ms_since(started), f"cannot resolve {name}: {error.strerror}")
    except OSError as error:
        return Reachability(False, _ms_since(started), f"port {port}: {_reason(error)}")
    elapsed = _ms_since(started)
    writer.close()
    await _closed_quietly(writer)
    return Reachability(True, elapsed, None)


async def probe_hosts(hosts, timeout: float = DEFAULT_TIMEOUT, local_names=None) -> dict:
    """Reachability of every Host (``.name``, ``.port``), keyed by name, probed concurrently."""
    local_names = this_machine_names() if local_names is None else local_names
    limit = asyncio.Semaphore(MAX_CONCURRENT_PROBES)

    async def probe_one(host) -> Reachability:
        if not needs_probe(host.name, host.port, local_names):
            return Reachability(True, 0.0, None)
        async with limit:
            return await probe_tcp(host.name, host.port or SSH_PORT, timeout)

    outcomes = await asyncio.gather(*(probe_one(host) for host in hosts))
    return {host.name: outcome for host, outcome in zip(hosts, outcomes)}


def _reason(error: OSError) -> str:
    # asyncio words connect failures as "Connect call failed (addr)"; the errno says why.
    if error.errno:
        return os.strerror(error.errno).lower()
    return str(error) or type(error).__name__


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 1)


async def _closed_quietly(writer) -> None:
    try:
        await asyncio.wait_for(writer.wait_closed(), 0.2)
    except (OSError, asyncio.TimeoutError):
        pass
