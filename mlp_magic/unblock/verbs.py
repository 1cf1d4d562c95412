"""``%mpirun --unblock``: end the World's hung torch.distributed collectives without ending any
process, then make the default process group again.

The ranks still running a cell (the World's ``busy_job``: a cell that timed out or was
interrupted and did not stop on SIGINT) get the unblock signal (agent/signals: here directly,
on other hosts through their agent); each one's unblock thread (unblock/rank/side) closes its
gloo connections and the stuck collective fails. Once every rank is free, the default group is
made again on all of them (unblock/rank/regroup), so the user's next cell needs no new code.
"""
from __future__ import annotations

import time

from mlp_magic.agent import signals as rank_signals
from mlp_magic.core.ranges import parse_ranks
from mlp_magic.debugging.pure.stops import HINT
from mlp_magic.errors import MlpMagicError
from mlp_magic.client.job import CHORE, RankJob
from mlp_magic.unblock.after import regroup
from mlp_magic.unblock.pure import report
from mlp_magic.unblock.pure.timing import AGAIN_AFTER_S
from mlp_magic.unblock.rank import mpi_world


def unblock(context, options) -> None:
    world = context.owner.world
    if world is None:
        raise MlpMagicError("%mpirun --unblock: no World running")
    chosen = _chosen_ranks(options.ranks, world.np)
    job = world.busy_job
    stopped = getattr(job, "paused_ranks", dict)()   # at a breakpoint: in pdb, not in a collective
    busy = [rank for rank in job.unfinished_ranks() if rank not in stopped] if job is not None else []
    wanted = [rank for rank in busy if chosen is None or rank in chosen]
    if not wanted:
        lines = _after_the_panels(world, job) or [
            report.stopped_not_hung(sorted(stopped), HINT) if stopped else report.nothing_hung(chosen)]
        print("\n".join(lines))
        return
    started = time.monotonic()
    signalled, problems = rank_signals.send(world, wanted, "unblock")
    bound = report.bound_s(world.ranks_per_cpu)
    if signalled:   # (none signalled: nothing will come free, no wait)
        _wait_asking_again(world, job, sorted(signalled), bound)
    still = job.unfinished_ranks()
    lines = []
    freed = [rank for rank in wanted if rank not in still]
    if freed:   # when the last of them came free, not when the wait for the others gave up
        last = max(job.finished_at(rank) or started for rank in freed)
        lines.append(report.freed(freed, max(0.0, last - started)))
    stuck = [rank for rank in wanted if rank in still]
    if stuck:
        lines.append(report.still_blocked(stuck, problems, bound))
    if still:
        if freed:   # (where none came free, the group is not what is in the way)
            lines.append(report.not_regrouped(still))
    else:
        world.release_busy()
        lines += regroup(world)
    print("\n".join(lines))


def free_survivors(world, job, ranks: list) -> list:
    """After a rank's death the World survived (ULFM): the ``ranks`` of ``job`` still running
    after the interrupt (blocked in a collective with the dead rank) get the unblock, as
    ``--unblock`` gives it; those still blocked after its bound."""
    signalled, _ = rank_signals.send(world, ranks, "unblock")
    if signalled:
        _wait_asking_again(world, job, sorted(signalled), report.bound_s(world.ranks_per_cpu))
    return [rank for rank in ranks if rank in job.unfinished_ranks()]


def _wait_asking_again(world, job, ranks: list, bound: float) -> None:
    """Until the ranks are free (or the bound), signalling once more those that show no sign
    after ``AGAIN_AFTER_S``: faulthandler skips a handler that starts while another of the
    process's is writing (a hang report's stacks), and the unblock is idempotent."""
    job.wait_while_freed(ranks, min(AGAIN_AFTER_S, bound))
    still = [rank for rank in ranks if rank in job.unfinished_ranks()]
    if still:
        rank_signals.send(world, still, "unblock")
        helpers = _progress_on_idle_ranks(world, job, bound)
        try:
            job.wait_while_freed(still, bound)
        finally:   # Ctrl-C too: the idle ranks are not left spinning before the next cell
            _settle(helpers)


def _progress_on_idle_ranks(world, job, seconds: float):
    """The ranks with nothing in flight run MPI's progress until the revocation reaches them: a
    revoked MPI call across hosts may wait on one of them (unblock/rank/mpi_world); a CHORE job,
    or None. Without ULFM each returns at once."""
    busy, alive = set(job.unfinished_ranks()), set(world.client.ids)
    idle = [row.rank for row in world.layout
            if row.rank not in busy and world.rank_to_engine.get(row.rank) in alive]   # not a dead one's
    if not idle:
        return None
    try:
        return RankJob.apply(world, CHORE, idle, mpi_world.progress_until_revoked, seconds)
    except Exception:  # noqa: BLE001 - an engine gone meanwhile: the unblock reports without them
        return None


def _settle(helpers) -> None:
    """The idle ranks' progress ends once the revocation reached them; where it never came (no
    MPI call was stuck after all), they are interrupted rather than waited for."""
    if helpers is None:
        return
    if not helpers.wait_all(time.monotonic() + AGAIN_AFTER_S):
        helpers.interrupt()
    helpers.release()


def _after_the_panels(world, job) -> list[str]:
    """Nothing hung now; the ranks may have come free by the panel's Unblock since the last cell,
    their group not made again yet: make it now (the lines saying so), else nothing."""
    if job is None or not job.ended_badly or job.unfinished_ranks():
        return []
    world.release_busy()
    return regroup(world)


def _chosen_ranks(spec, size: int) -> list | None:
    return None if spec is None else parse_ranks(spec, size)
