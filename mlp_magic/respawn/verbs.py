"""``%mpirun --respawn [--ranks SPEC] [--copy NAMES [--from RANK]]``: the dead ranks of a World
that survived their deaths (ULFM) start again as the same ranks; the live ones keep their state.

Everything that can be refused is checked before anything starts (respawn/pure/plan). The World
itself changes in world/respawn; then torch's default group is made again where the live ranks
had one, the named values are copied from a live rank, and one line names what a new rank still
lacks.
"""
from __future__ import annotations

import time

from mlp_magic import config
from mlp_magic.client.job import call
from mlp_magic.client.remote_errors import Failed
from mlp_magic.core.ranges import by_message, parse_ranks, rank_words
from mlp_magic.errors import MlpMagicError
from mlp_magic.respawn.pure import plan
from mlp_magic.values.pure.compare import size_text
from mlp_magic.world.pure.deaths import EXITED_WITH_STATUS
from mlp_magic.respawn.rank import names as rank_names
from mlp_magic.world import respawn as world_respawn

ASK_TIMEOUT_S = 30.0
COPY_TIMEOUT_S = 600.0


def respawn(context, options) -> None:
    world = context.owner.world
    if world is None:
        raise MlpMagicError("%mpirun --respawn: no World running")
    if not world.survives_deaths:   # said first: it is why such a World stopped at a death
        raise MlpMagicError("%mpirun --respawn: this World's ranks end together when one dies (no ULFM: see "
                            "the line its start printed); `%mpirun --restart` starts all ranks again")
    if not world.alive():   # its launcher or controller ended: every rank went with it
        raise MlpMagicError("%mpirun --respawn: the World has stopped, every rank with it; "
                            "`%mpirun --restart` starts it again")
    # (an earlier cell's group is made again below, over the new ranks too: not said twice)
    context.owner.idle_world(world, notice=lambda line: None)
    chosen = parse_ranks(options.ranks, world.np) if options.ranks else None
    ranks = plan.chosen_dead(sorted(world.dead_ranks), chosen, world.lost_hosts, world.host_of)
    plan.refuse_unheard(ranks, world.dead_ranks, EXITED_WITH_STATUS)
    live = [row.rank for row in world.layout if row.rank not in world.dead_ranks]
    if not live:
        raise MlpMagicError("%mpirun --respawn: no rank is alive to start the dead from; "
                            "`%mpirun --restart` starts all ranks again")
    if not world.spec.topology.is_local:
        plan.refuse_hosts_without_live(ranks, live, world.host_of)
    source = plan.copy_source(live, options.names, options.source, world.np)
    if source is not None:
        held = _ask(world, [source], rank_names.held_names)[source]
        refused = plan.missing_names_line(options.names, held, source)
        if refused:
            raise MlpMagicError(refused)
    started = time.monotonic()
    pids = world_respawn.respawn(world, ranks)
    lines = [plan.respawned_line(pids, time.monotonic() - started, world.np)]
    lines += world_respawn.remake_default_group(world, ranks)
    if source is not None:
        lines.append(_copy(world, options.names, source, ranks, config.pull_cap(context.env)))
    reference = source if source is not None else min(live)
    held = _ask(world, [reference, *ranks], rank_names.held_names)
    lines += plan.lacks_lines(held, reference, ranks)
    print("\n".join(lines))


def _ask(world, ranks: list, function, *args) -> dict:
    answers = call(world, ranks, function, *args, timeout=ASK_TIMEOUT_S, what="%mpirun --respawn")
    failed = {rank: answer.message for rank, answer in answers.items() if isinstance(answer, Failed)}
    if failed:
        raise MlpMagicError(f"%mpirun --respawn: {by_message(failed)}")
    return answers


def _copy(world, names: tuple, source: int, ranks: list, cap: int) -> str:
    """The named values from ``source`` to the new ranks, in one pickle; the line saying so."""
    packed = call(world, [source], rank_names.pack_names, list(names), cap, timeout=COPY_TIMEOUT_S,
                  what="%mpirun --respawn --copy")[source]
    if isinstance(packed, (Failed, rank_names.Refused)):
        return f"nothing copied: rank {source}: {packed.message}"
    stored = call(world, ranks, rank_names.unpack_names, packed, timeout=COPY_TIMEOUT_S,
                  what="%mpirun --respawn --copy")
    failed = {rank: answer.message for rank, answer in stored.items() if isinstance(answer, Failed)}
    if failed:
        return f"not copied to every new rank: {by_message(failed)}"
    return (f"copied {', '.join(names)} ({packed.type_name}; {size_text(packed.nbytes)}) "
            f"from rank {source} to {rank_words(ranks)}")
