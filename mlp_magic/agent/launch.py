"""The World's per-host agents (agent/): one per host, started through its first engine.

Right after the bootstrap, each host's first rank (core/placement.first_rank_per_host) runs
``agent/rank/start.start_agent`` as a host chore (engine/bootstrap.run_chore: its modules do
not stay in the rank), with a key made here, that host's ranks (pid and start time: the only
processes its "interrupt" may signal) and the log root (the only folder its "tail" may read).
The agent samples the host's GPUs once a second and serves them to the panel's server; it dies
with the engine that started it (its stdin and the engine's pidfd are its lifeline). The key
goes in the World's record's private part only (world/published: 0600, never served); the
address and port are public. An agent that does not start never fails the World: its host's
entry says why.
"""
from __future__ import annotations

import secrets

from mlp_magic import config
from mlp_magic.machine.names import stays_here
from mlp_magic.agent.tls import make_certificate
from mlp_magic.core.placement import first_rank_per_host
from mlp_magic.engine.bootstrap import AGENT_CHORE, run_chore
from mlp_magic.errors import MlpMagicError
from mlp_magic.client.job import CHORE, call_each
from mlp_magic.client.remote_errors import Failed

START_TIMEOUT_S = 15.0
AGENT_START_S = 10.0   # each agent's own start, within the chore
LOOPBACK = "127.0.0.1"


def _address(world, rank: int) -> str:
    """Where the server (on the kernel's machine) reaches this rank's host; the agent binds there."""
    if world.spec.topology.is_local or stays_here(world.host_of(rank)):
        return LOOPBACK
    return world.identities[rank].get("addr") or world.host_of(rank)


def _host_ranks(world, host: str) -> dict:
    names = ("pid", "create_time", "pgid", "sid")
    return {row.rank: {name: world.identities[row.rank].get(name) for name in names}
            for row in world.layout if row.host == host}


def start_agents(world, timeout: float = START_TIMEOUT_S) -> tuple:
    """({host: {"addr", "port", "pid"} or {"error": text}}, the key) for the World's record: hex,
    or ``{"key": hex, "cert": PEM}`` where the agents serve TLS (an encrypted World: agent/tls)."""
    key = secrets.token_hex(32)
    tls = _certificate(world) if world.encrypted else None
    firsts = first_rank_per_host(world.layout)
    addresses = {rank: _address(world, rank) for rank in firsts.values()}
    arguments = {rank: (AGENT_CHORE, key, addresses[rank], _host_ranks(world, host), config.log_root(),
                        AGENT_START_S, tls)
                 for host, rank in firsts.items()}
    key = {"key": key, "cert": tls["cert"]} if tls else key
    try:
        answers = call_each(world, arguments, run_chore, timeout=timeout, what="starting the GPU agents",
                            kind=CHORE)
    except MlpMagicError as error:
        return {host: {"error": str(error)} for host in firsts}, key
    agents = {}
    for host, rank in firsts.items():
        answer = answers.get(rank)
        if isinstance(answer, dict) and "port" in answer:
            agents[host] = {"addr": addresses[rank], "port": answer["port"], "pid": answer["pid"]}
        else:
            agents[host] = {"error": _why(answer)}
    note = agents_note(agents)
    if note:
        world.notice(note)
    return agents, key


def _certificate(world) -> dict | None:
    """The agents' TLS certificate and key ({"cert", "key"} PEMs); None, said once, without openssl."""
    try:
        cert, key = make_certificate()
    except OSError as error:
        world.notice(f"mlp_magic: the GPU agents' connections are not encrypted ({error}): cell output "
                     "they serve (the panel's Tail) is readable on the network")
        return None
    return {"cert": cert, "key": key}


def _why(answer) -> str:
    """A failed start in one line: our own error's words as they are (it is meant for users)."""
    if isinstance(answer, Failed):
        return answer.message.removeprefix(f"{MlpMagicError.__name__}: ")
    return f"unexpected answer from the engine: {answer!r}"[:300]


def agents_note(agents: dict) -> str | None:
    """One line for the start message when some hosts have no agent, else None."""
    failed = {host: entry["error"] for host, entry in agents.items() if "error" in entry}
    if not failed:
        return None
    host, why = next(iter(failed.items()))
    more = f" (and {len(failed) - 1} more hosts)" if len(failed) > 1 else ""
    return f"mlp_magic: no live GPU readings from {host}{more}: {why}"
