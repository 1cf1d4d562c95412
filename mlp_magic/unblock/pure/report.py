"""What ``%mpirun --unblock`` says: the ranks freed, the ranks still blocked, the default process
group re-made, the subgroups left stale; and the hint every hang message ends with."""
from __future__ import annotations

from mlp_magic.core.ranges import fold_ranks, rank_words
from mlp_magic.unblock.pure.timing import BOUND_S, FREE_CPU_S

HUNG_HINT = ("`%mpirun --unblock` ends a hung torch.distributed collective and keeps the ranks' state; "
             "`%mpirun --restart` starts the World again")


def bound_s(ranks_per_cpu: float) -> float:
    """Seconds without a rank coming free before the others are named (``BOUND_S`` on a host
    with a core per rank)."""
    return BOUND_S + FREE_CPU_S * max(ranks_per_cpu - 1.0, 0.0)


def nothing_hung(ranks: list | None) -> str:
    scope = f" of ranks {fold_ranks(ranks)}" if ranks else ""
    return f"nothing to unblock: no rank{scope} is still running a cell; nothing was changed"


def stopped_not_hung(ranks: list, hint: str) -> str:
    return (f"nothing to unblock: {rank_words(ranks)} stopped at a breakpoint, in pdb and not in a "
            f"collective; nothing was changed. {hint}")


def freed(ranks: list, seconds: float) -> str:
    return (f"{rank_words(ranks)} came free in {seconds:.1f} s: the stuck call failed there, every process "
            "and its state stayed")


def still_blocked(ranks: list, problems: dict, bound: float = BOUND_S) -> str:
    why = "; ".join(f"{host + ': ' if host else ''}{problem}" for host, problem in sorted(problems.items()))
    return (f"{rank_words(ranks)} did not come free within {bound:.3g} s (tried: closing their gloo "
            f"connections, aborting their NCCL communicators, revoking MPI's where ULFM is on"
            f"{'; ' + why if why else ''}): not in a collective that can be ended. An MPI call cannot be "
            "ended short of a fault-tolerant MPI (Open MPI 5's ULFM, on by default in a World over "
            "ob1); `%mpirun --stacks` shows where they are, `%mpirun --restart` starts the "
            "World again")


def mpi_shrunk(answers: dict) -> str:
    """The line for ``{rank: what mpi_world.shrink_world answered}``."""
    made = {rank: a for rank, a in answers.items() if isinstance(a, dict) and "size" in a}
    if not made or len(made) < len(answers):
        failed = sorted(rank for rank in answers if rank not in made)
        return (f"the World's MPI communicator was revoked, and {rank_words(failed)} could not make a new "
                "one: `%mpirun --restart` starts the World again")
    first = made[min(made)]
    return (f"the World's MPI communicator was revoked to end the stuck MPI call ({first['library']}, "
            f"ULFM); `comm` now names a new one of the same {first['size']} ranks on every rank: "
            "MPI.COMM_WORLD stays revoked, code that uses it (or a communicator made from it) must use "
            "`comm`")


def not_regrouped(blocked: list) -> str:
    verb = "is" if len(blocked) == 1 else "are"
    return (f"nothing was made again (no new default process group, no new MPI communicator): "
            f"{rank_words(blocked)} {verb} still blocked, and every rank takes part")


def regrouped(answers: dict) -> list[str]:
    """Lines for ``{rank: what regroup.recreate_default_group answered}`` (a dict, None, or a
    failure's text)."""
    made = {rank: a for rank, a in answers.items() if isinstance(a, dict) and "backend" in a}
    failed = {rank: (a.get("error") if isinstance(a, dict) else str(a)) for rank, a in answers.items()
              if a is not None and rank not in made}
    lines = []
    if made:
        first = made[min(made)]
        lines.append(f"the default process group was made again ({backend_name(first['backend'])}, "
                     f"{first['world_size']} ranks) on ranks {fold_ranks(sorted(made))}: the next cell's "
                     "collectives on it work; what kept the old one (DDP, FSDP, a DeviceMesh, a saved "
                     "dist.group.WORLD) must be made again")
        stale = {f"group {name!r} (ranks {fold_ranks(ranks)})"
                 for answer in made.values() for name, ranks in answer["stale"]}
        if stale:
            lines.append("groups made with new_group are stale, make them again: "
                         + ", ".join(sorted(stale)))
    for text in sorted(set(failed.values())):
        ranks = sorted(rank for rank, why in failed.items() if why == text)
        lines.append(f"ranks {fold_ranks(ranks)}: the default process group was not made again: {text}")
    if not answers or all(a is None for a in answers.values()):
        lines.append("no default process group to make again (torch.distributed not initialised)")
    return lines


def backend_name(config: str) -> str:
    """``"cpu:gloo,cuda:nccl"`` (torch's backend config) -> ``"gloo/nccl"``; a plain name as it is."""
    if ":" not in config:
        return config
    return "/".join(dict.fromkeys(part.partition(":")[2] for part in config.split(",")))


def not_regrouped_without(dead: list) -> str:
    return (f"the default process group was not made again: {rank_words(dead)} died, and a group "
            "needs every rank (`%mpirun --restart` starts all ranks again)")
