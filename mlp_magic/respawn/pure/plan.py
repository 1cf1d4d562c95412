"""``%mpirun --respawn``: which dead ranks to start again, where --copy takes its names from, and
the lines that say what happened (pure: the World's facts in, ranks and text out)."""
from __future__ import annotations

from mlp_magic.core.ranges import fold_ranks, rank_words
from mlp_magic.errors import MlpMagicError

LACKS_LISTED = 8   # names listed in the "lacks" line; the count says the rest


def chosen_dead(dead: list, chosen: list | None, lost_hosts: dict, host_of) -> list:
    """The dead ranks to start again: ``chosen`` (--ranks) or every dead one; one error where a
    chosen rank is alive, nothing is dead, or a rank's host stopped answering."""
    if not dead:
        raise MlpMagicError("%mpirun --respawn: no rank is dead; nothing to start again")
    alive = sorted(set(chosen or ()) - set(dead))
    if alive:
        raise MlpMagicError(f"%mpirun --respawn --ranks: {rank_words(alive)} "
                            f"{'is' if len(alive) == 1 else 'are'} alive; the dead are {fold_ranks(dead)}")
    ranks = sorted(chosen) if chosen else sorted(dead)
    gone = {host_of(rank) for rank in ranks if host_of(rank) in lost_hosts}
    if gone:
        raise MlpMagicError(f"%mpirun --respawn: {', '.join(sorted(gone))} stopped answering, so no rank can "
                            "start there: `%mpirun --restart` starts the World again once it answers")
    return ranks


def refuse_unheard(ranks: list, how_dead: dict, exited: str) -> None:
    """One error where a rank to start again ended in a way the others' MPI never hears of (a
    non-zero exit, ``how_dead`` starting with ``exited``): their shrink would wait for it forever
    (measured: Open MPI 5.0.11, ``os._exit(3)``)."""
    unheard = [rank for rank in ranks if how_dead.get(rank, "").startswith(exited)]
    if unheard:
        raise MlpMagicError(f"%mpirun --respawn: {rank_words(unheard)} {how_dead[unheard[0]]}, "
                            "which Open MPI never tells the other ranks of, so they cannot leave it out "
                            "and start it again; "
                            "`%mpirun --restart` starts all ranks again")


def refuse_hosts_without_live(ranks: list, live: list, host_of) -> None:
    """Across hosts a new process learns the controller's address from a live rank of its host
    (respawn/rank/mpi_join): one error where a dead rank's host has none left."""
    bare = sorted({host_of(rank) for rank in ranks} - {host_of(rank) for rank in live})
    if bare:
        raise MlpMagicError(f"%mpirun --respawn: no rank of {', '.join(bare)} is alive to hand a new process "
                            "the World's connection there; `%mpirun --restart` starts all ranks again")


def copy_source(live: list, names: tuple | None, source: int | None, np: int) -> int | None:
    """The live rank --copy copies from (--from, else the lowest live rank); None without --copy."""
    if source is not None and not names:
        raise MlpMagicError("%mpirun --respawn --from RANK names where --copy copies from: "
                            "give --copy NAMES too")
    if not names:
        return None
    if source is None:
        return min(live)
    if source >= np:
        raise MlpMagicError(f"%mpirun --respawn --from {source}: the World has ranks 0-{np - 1}")
    if source not in live:
        raise MlpMagicError(f"%mpirun --respawn --from {source}: rank {source} is dead; "
                            f"the live ranks are {fold_ranks(live)}")
    return source


def missing_names_line(names: tuple, held: list, source: int) -> str:
    """The --copy names the source lacks, as one error line; "" where it holds them all."""
    modules = [name for name in names if f"+{name}" in set(held)]
    if modules:
        what = "is a module" if len(modules) == 1 else "are modules"
        return (f"%mpirun --respawn --copy: {', '.join(modules)} {what} on rank {source}, not a value "
                "to copy: an import on the new ranks makes "
                f"{'it' if len(modules) == 1 else 'them'}; nothing was started")
    missing = [name for name in names if name not in set(held)]
    if not missing:
        return ""
    return (f"%mpirun --respawn --copy: rank {source} has no {', '.join(missing)}; nothing was started "
            f"(its names: {names_listed([name for name in held if not name.startswith('+')])})")


def names_listed(names: list) -> str:
    shown = ", ".join(names[:LACKS_LISTED])
    return shown + (", ..." if len(names) > LACKS_LISTED else "") if names else "none"


def respawned_line(pids: dict, seconds: float, size: int) -> str:
    """ "rank 2 (pid 123) started again in 2.1 s: `comm` is a communicator of all 4 ranks ..." """
    started = ", ".join(f"rank {rank} (pid {pid})" for rank, pid in sorted(pids.items()))
    return (f"{started} started again in {seconds:.1f} s: `comm` is a communicator of all {size} ranks "
            "(MPI.COMM_WORLD cannot be repaired: use `comm`)")


def lacks_lines(held: dict, source: int, new_ranks: list) -> list:
    """One line per group of new ranks that lack names the source holds (what to copy, or whose
    cells to run again): "rank 2 lacks 12 names that rank 0 has: model, opt, loader, ...; and
    imports os, torch". ``held``: {rank: names}, modules as ``+name`` (respawn/rank/names)."""
    by_missing: dict = {}
    for rank in new_ranks:
        mine = set(held.get(rank, []))
        missing = tuple(name for name in held.get(source, []) if name not in mine)
        if missing:
            by_missing.setdefault(missing, []).append(rank)
    lines = []
    for missing, ranks in by_missing.items():
        values = [name for name in missing if not name.startswith("+")]
        modules = [name[1:] for name in missing if name.startswith("+")]
        what = f"{len(values)} name{'s' if len(values) != 1 else ''} that rank {source} has: " \
            f"{names_listed(values)}" if values else f"imports that rank {source} has"
        what += f"{'; and imports ' if values else ': '}{names_listed(modules)}" if modules else ""
        how = "`%mpirun --respawn --copy NAMES` copies values; or run their cells" if values \
            else "run their imports"
        lines.append(f"{rank_words(ranks)} {'lacks' if len(ranks) == 1 else 'lack'} {what} "
                     f"({how} with --ranks {fold_ranks(ranks)})")
    return lines
