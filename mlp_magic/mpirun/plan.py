"""What a ``%%mpirun`` cell needs before anything runs: the World it runs on and its ranks.

A bare ``%%mpirun`` keeps the World it has; hosts, ``-np`` or ``--oversubscribe`` name another
(the job's MLP_* variables, a hostfile, ``-H``), checked here so that a bad ``-np`` is refused
before the running World is touched.
"""
from __future__ import annotations

import re

from mlp_magic.core.ranges import fold_ranks, parse_ranks, rank_words
from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.errors import MlpMagicError
from mlp_magic.world.world import WorldSpec


def wanted_spec(args, env, running=None) -> WorldSpec:
    """The WorldSpec a cell with ``args`` asks for; ``running``: the World there is now."""
    explicit_hosts = args.hostfile or args.hosts is not None
    same_size = running is not None and args.np in (None, running.np)
    if same_size and not explicit_hosts and not args.oversubscribe:
        return running.spec  # a bare %%mpirun keeps the World it has
    topology = topology_from_environment(env, hostfile=args.hostfile, hosts=args.hosts)
    _refuse_ssh_details(topology)
    np = args.np or _default_np(env, topology)
    spec = WorldSpec(topology, np, args.oversubscribe)
    topology.layout(np, args.oversubscribe)  # refuse a bad -np before touching the running World
    return spec


def chosen_ranks(spec: str | None, np: int) -> list:
    """``--ranks SPEC`` of a World of ``np`` ranks (every rank without it)."""
    return parse_ranks(spec, np) if spec else list(range(np))


def live_ranks(world, ranks: list, chosen: bool, notice) -> list:
    """``ranks`` of ``world`` without those that died (the World survived them: ULFM); naming a
    dead rank (``chosen``: --ranks) is one error, changing nothing."""
    dead = sorted(set(ranks) & world.dead_ranks.keys())
    if not dead:
        return ranks
    if chosen:
        living = fold_ranks(r for r in range(world.np) if r not in world.dead_ranks)
        raise MlpMagicError(f"--ranks: {rank_words(dead)} died in an earlier cell; the World runs on "
                            f"ranks {living} (`%mpirun --respawn` starts the dead again)")
    notice(f"mlp_magic: {rank_words(dead)} died in an earlier cell: "
           f"running on the other {len(ranks) - len(dead)}")
    return [rank for rank in ranks if rank not in dead]


def _refuse_ssh_details(topology) -> None:
    """mpiexec's ssh launcher takes host names only: a user or port from a pssh-style list
    would be silently dropped, so say where they belong instead."""
    for host in topology.hosts:
        if host.user or host.port:
            detail = f"user {host.user}" if host.user else f"port {host.port}"
            raise MlpMagicError(
                f"{topology.source}: {host.name} has {detail}, which mpiexec cannot use; put it in "
                f"~/.ssh/config (Host {host.name} / User / Port) and list the host by name")


def _default_np(env, topology) -> int:
    value = env.get("MLP_MPI_NP", "").strip()
    if value and not topology.is_local:
        if not re.fullmatch(r"[0-9]{1,7}", value) or int(value) <= 0:
            raise MlpMagicError(f"$MLP_MPI_NP must be a positive integer, got {value!r}")
        return int(value)
    return topology.total_slots
