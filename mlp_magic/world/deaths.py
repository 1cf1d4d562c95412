"""Which rank of a World died during a cell, and how: read from its launcher's log. And what a
World whose controller died says, and does with its ranks.

The launcher names the first rank to fail once the job has ended, a moment after the kernel
notices. Nothing announces that line (a file: no event for it without inotify, which the
standard library lacks), so the log is read again on machine/deadline.until's pace until it names a
rank, or every launcher process has ended (its log is then complete), or the deadline.
"""
from __future__ import annotations

import signal
import time

from mlp_magic.machine.deadline import until
from mlp_magic.world.pure.deaths import (collective_without_note, death_note, launcher_named_rank,
                                         survivors_note)

LAUNCHER_PATIENCE_S = 2.0   # mpiexec reports a death once the job ended
PLAIN_PATIENCE_S = 0.3      # plain engines are processes of their own: their end is known at once


def how_ranks_died(world) -> str:
    """One sentence naming the rank that died first, and how (empty when the log says nothing)."""
    deadline = time.monotonic() + (LAUNCHER_PATIENCE_S if world.mpi is not None else PLAIN_PATIENCE_S)
    read = [""]

    def complete() -> bool:
        ended = not any(process.running() for process in world.processes[1:])
        read[0] = launcher_log(world)
        return ended or launcher_named_rank(read[0]) is not None

    until(complete, deadline, longest_s=0.1)
    pid_of_rank = {rank: identity["pid"] for rank, identity in world.identities.items()}
    return death_note(read[0], exited_ranks(world), pid_of_rank, world.host_of)


def survivors_died_note(world, ranks) -> str:
    """One sentence naming the cell's ranks that died, and how, the others living on (ULFM)."""
    dead = {rank: how for rank, how in world.dead_ranks.items() if rank in ranks}
    pid_of_rank = {rank: identity["pid"] for rank, identity in world.identities.items()}
    return survivors_note(dead, world.np - len(world.dead_ranks), pid_of_rank, world.host_of)


def dead_peers_note(world, results: list) -> str:
    """Where ranks failed in a collective with ranks dead in an earlier cell: one line saying
    so (pure/deaths.collective_without_note); "" otherwise."""
    return collective_without_note(list(world.dead_ranks), [r.error or "" for r in results])


def launcher_log(world, limit: int = 200_000) -> str:
    """The tail of what mpiexec (or the plain engines) wrote: where deaths are reported."""
    texts = []
    for process in world.processes[1:]:
        try:
            with open(process.log_path, errors="replace") as handle:
                handle.seek(0, 2)
                handle.seek(max(0, handle.tell() - limit))
                texts.append(handle.read())
        except OSError:
            pass
    return "\n".join(texts)


def exited_ranks(world) -> list:
    """Plain engines (no launcher) are a process each: the ranks whose process has ended."""
    if world.mpi is not None:
        return []
    return [rank for rank, process in enumerate(world.processes[1:]) if not process.running()]


def controller_lost(world) -> None:
    """The controller ended (killed, the OOM killer's pick): nothing reaches the ranks any more,
    so they are stopped now, not at their heartbeat's end, with what the controller left in its
    session (its scheduler); from the lifeline's thread. How it ended is read first (stopping
    its group reaps it)."""
    controller = world.processes[0]
    controller.end_code = controller.popen.poll() if controller.popen is not None else None
    for process in world.processes:
        process.stop()


def _how(code) -> str:
    if code is None:
        return "ended"
    return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"


def controller_ended(world) -> str:
    """One line for the next cell when the World's controller was lost (killed, OOM), else "".
    One stopped on purpose (the panel's Restart, ``mlp-magic stop``: SIGTERM, which it ends on
    cleanly) says nothing: the next cell starts a new World, as the Restart button promises."""
    ended = world.lifeline.ended if world.lifeline is not None else None
    if ended is None or not world.processes or ended is not world.processes[0]:
        return ""
    code = getattr(ended, "end_code", None)
    if code in (0, -signal.SIGTERM):
        return ""
    return (f"the World's controller ({ended.name}, pid {ended.pid}) {_how(code)}: "
            "its ranks were stopped, and what they held is lost; run the cell again to start a new World")


def lost_hosts_note(lost_hosts: dict, silent: dict) -> str:
    """The cell's note when hosts stopped answering ({host: ranks}, {host: seconds silent})."""
    from mlp_magic.core.ranges import fold_hosts, fold_ranks

    ranks = sorted(rank for ranks in lost_hosts.values() for rank in ranks)
    hosts = fold_hosts(lost_hosts)
    return (f"{hosts} stopped answering (nothing for {max(silent.values()):.0f} s: a link or the host "
            f"is down): ranks {fold_ranks(ranks)} there are lost, the other ranks were interrupted; "
            f"`%mpirun --restart` starts the World again once {hosts} answers (`allrun -H {hosts} hostname`)")


def lost_hosts_refusal(world) -> str:
    """The next cell's one line after hosts were lost, else ""."""
    if not world.lost_hosts:
        return ""
    from mlp_magic.core.ranges import fold_hosts

    hosts = fold_hosts(world.lost_hosts)
    return (f"the World lost {hosts} in its last cell: the ranks there are gone, and an MPI World "
            f"cannot go on without them; run the cell again to start a new World once {hosts} "
            f"answers (`allrun -H {hosts} hostname`)")


def unregistered_refusal(world) -> str:
    """One line when ranks' engines are no longer registered with the controller (it gave up on
    their heartbeats: a host gone quiet between cells), else ""."""
    try:
        registered = set(world.client.ids)
    except Exception:  # noqa: BLE001 - a client that cannot say: the cell itself will
        return ""
    gone = sorted(rank for rank, engine in world.rank_to_engine.items()
                  if engine not in registered and rank not in world.dead_ranks)
    if not gone:
        return ""
    from mlp_magic.core.ranges import fold_hosts, fold_ranks

    hosts = fold_hosts(dict.fromkeys(world.host_of(rank) for rank in gone))
    return (f"ranks {fold_ranks(gone)} on {hosts} left the World (the controller heard nothing from "
            "them for too long): what they held is lost; run the cell again to start a new World")
