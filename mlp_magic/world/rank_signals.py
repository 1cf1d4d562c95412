"""SIGINT to a World's ranks as processes, not through ipyparallel: the interrupt's fallback where
the client cannot send ipykernel's interrupt_request (world/ipp_private.send_interrupt).

ipyparallel's public ``send_signal`` is no fallback: it asks each engine's nanny, and our engines
run without one. So the ranks are signalled as the panel's actions do: on this machine directly,
elsewhere through the host's agent (agent/), each pid checked against its start time (a reused
pid is never signalled; agent/actions.interrupt_ranks). A rank between cells ignores SIGINT
(engine/sigint), so signalling a host's idle ranks too is harmless.
"""
from __future__ import annotations

import asyncio
import threading

from ..agent.actions import interrupt_ranks
from ..core.local_names import stays_here

AGENT_TIMEOUT_S = 5.0


def interrupt(world, ranks: list) -> bool:
    """SIGINT ``ranks``; True when every one was signalled."""
    by_host: dict = {}
    for rank in ranks:
        by_host.setdefault(world.host_of(rank), []).append(rank)
    signalled: list = []
    remote = {}
    for host, host_ranks in by_host.items():
        if world.spec.topology.is_local or stays_here(host):
            known = {r: {"pid": world.identities[r]["pid"], "create_time": world.identities[r]["create_time"]}
                     for r in host_ranks if r in world.identities}
            signalled += interrupt_ranks(known)["signalled"] if known else []
        else:
            remote[host] = host_ranks
    if remote:
        signalled += _through_agents(world, remote)
    return set(ranks) <= set(signalled)


def _through_agents(world, remote: dict) -> list:
    """Each host's agent signals its ranks; the ones signalled (a host without an agent: none)."""
    from ..agent.client import call

    async def one(host: str, host_ranks: list) -> list:
        agent = world.agents.get(host) or {}
        if "port" not in agent or not world.agent_key:
            return []
        answer = await call(agent["addr"], agent["port"], world.agent_key, "interrupt",
                            timeout=AGENT_TIMEOUT_S, ranks=host_ranks)
        return list(answer.get("signalled") or [])

    async def every() -> list:
        found = await asyncio.gather(*(one(h, r) for h, r in remote.items()), return_exceptions=True)
        return [rank for answer in found if isinstance(answer, list) for rank in answer]

    result: list = []
    # its own thread and loop: the kernel's may be running one (ipykernel's)
    worker = threading.Thread(target=lambda: result.extend(asyncio.run(every())), daemon=True)
    worker.start()
    worker.join(AGENT_TIMEOUT_S + 1)
    return result
