"""Signals to a World's ranks as processes, not through ipyparallel: SIGINT for the panel's
Interrupt (panel/actions, from the World's record, while the kernel may be stuck) and the World's
own interrupt where the client cannot send ipykernel's interrupt_request (client/ipp_private);
the unblock signal for ``%mpirun --unblock`` (unblock/verbs) and the panel's Unblock, to busy
ranks; the progress signal for the panel's Unblock, to idle ranks (unblock/rank/mpi_world).

ipyparallel's public ``send_signal`` is no fallback: it asks each engine's nanny, and our engines
run without one. So the ranks are signalled on this machine directly, elsewhere through the host's
agent (agent/), each pid checked against its start time, the same rule in both places
(agent/actions.interrupt_ranks): a reused pid is never signalled. A rank between cells ignores
SIGINT (engine/sigint), so signalling a host's idle ranks too is harmless.
"""
from __future__ import annotations

import asyncio
import threading

from mlp_magic.agent.actions import interrupt_ranks, progress_ranks, unblock_ranks
from mlp_magic.agent.protocol import RequestError
from mlp_magic.machine.names import stays_here
from mlp_magic.core.ranges import fold_ranks
from mlp_magic.world.pure.record import rank_number

AGENT_TIMEOUT_S = 5.0


class Targets:
    """What signalling needs: the ranks by host, each rank's (pid, start time), the hosts' agents
    ({host: {"addr", "port"}}) and their key, and which hosts are this machine."""

    def __init__(self, by_host: dict, processes: dict, agents: dict, key, here=stays_here):
        self.by_host, self.processes, self.agents, self.key, self.here = by_host, processes, agents, key, here

    @classmethod
    def of_world(cls, world, ranks: list) -> "Targets":
        by_host: dict = {}
        for rank in ranks:
            by_host.setdefault(world.host_of(rank), []).append(rank)
        processes = {r: (i.get("pid"), i.get("create_time")) for r, i in world.identities.items()}
        local = world.spec.topology.is_local
        return cls(by_host, processes, world.agents, world.agent_key,
                   here=(lambda host: True) if local else stays_here)


async def signal_all(targets: Targets, op: str = "interrupt") -> tuple:
    """(ranks signalled, {host: why not}) for every host at once; ``op``: "interrupt" (SIGINT),
    "unblock" (unblock/rank/side's signal) or "progress" (unblock/rank/mpi_world's), the last two
    only to ranks that catch them."""
    signalled: list = []
    problems: dict = {}
    remote = {}
    for host, ranks in targets.by_host.items():
        if targets.here(host):
            known = {r: {"pid": targets.processes[r][0], "create_time": targets.processes[r][1]}
                     for r in ranks if (targets.processes.get(r) or (None,))[0]}
            try:
                answer = _LOCAL[op](known) if known else {}
            except RequestError as refused:
                problems[host] = str(refused)
                continue
        else:
            remote[host] = _through_agent(targets, host, ranks, op)
            continue
        signalled += _taken(answer, host, problems, op)
    for host, answer in zip(remote, await asyncio.gather(*remote.values(), return_exceptions=True)):
        if isinstance(answer, BaseException):
            problems[host] = str(answer) or type(answer).__name__
        else:
            signalled += _taken(answer, host, problems, op)
    return signalled, problems


_LOCAL = {"interrupt": interrupt_ranks, "unblock": unblock_ranks, "progress": progress_ranks}


def _taken(answer: dict, host: str, problems: dict, op: str) -> list:
    """The ranks an answer says were signalled; its deaf ones (no thread for the signal) as a problem.
    An answer's lists hold ranks, or they are read as naming none (an agent of another version)."""
    deaf = _ranks_in(answer.get("deaf"))
    if deaf:
        problems[host] = (f"ranks {fold_ranks(deaf)} have no {op} thread (not an engine "
                          "mlp_magic set up, or one of an older mlp_magic): not signalled")
    return _ranks_in(answer.get("signalled"))


def _ranks_in(value) -> list:
    return [rank for rank in value if rank_number(rank) is not None] if isinstance(value, list) else []


async def _through_agent(targets: Targets, host: str, ranks: list, op: str) -> dict:
    agent = targets.agents.get(host) or {}
    if "port" not in agent or not targets.key:
        raise RequestError(f"no agent on {host} for this World (it started without one)")
    from mlp_magic.agent.client import call

    return await call(agent["addr"], agent["port"], targets.key, op, timeout=AGENT_TIMEOUT_S, ranks=ranks)


def interrupt(world, ranks: list) -> bool:
    """SIGINT ``ranks`` of a live World, from the kernel (whose thread may run an event loop:
    this runs its own, in a thread); True when every one was signalled."""
    signalled, _ = send(world, ranks, "interrupt")
    return set(ranks) <= set(signalled)


def send(world, ranks: list, op: str) -> tuple:
    """``op`` ("interrupt", "unblock") to ``ranks`` of a live World from the kernel, in a thread
    of its own (the kernel's may run an event loop): (ranks signalled, {host: why not})."""
    found: list = []
    targets = Targets.of_world(world, ranks)
    worker = threading.Thread(target=lambda: found.append(asyncio.run(signal_all(targets, op))), daemon=True)
    worker.start()
    worker.join(AGENT_TIMEOUT_S + 1)
    return found[0] if found else ([], {"": f"no answer within {AGENT_TIMEOUT_S + 1:g} s"})
