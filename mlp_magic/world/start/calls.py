"""The World's calls on every engine while it starts (identify, bootstrap), and what a failed one
tells the user: one line naming the ranks, their hosts and the cause, never a RemoteError's
traceback. The calls are RankJobs of the ``START`` kind: the first failure ends the wait a
moment later, and the World is then stopped by its caller.
"""
from __future__ import annotations

from mlp_magic.core.ranges import fold_hosts, fold_ranks
from mlp_magic.errors import MlpMagicError
from mlp_magic.client.job import START, RankJob
from mlp_magic.client.remote_errors import grouped_causes, one_line


def gather(world, pending: dict, what: str, deadline: float, step: str = "") -> dict:
    """{rank: AsyncResult} -> {rank: value}, before ``deadline`` (monotonic). Ranks whose call
    failed (``step``: what it is called then), or that do not answer (``what`` they did not
    finish), fail the start with one MlpMagicError naming them."""
    job = RankJob(world, START, list(pending), list(pending.values()))
    job.wait_all(deadline)
    failed = {rank: error for rank in job.ranks if (error := job.error(rank)) is not None}
    if failed:
        raise MlpMagicError(failure_line(failed, world.host_of, step or what, world.workdir))
    late = job.unanswered()
    if late:
        hosts = fold_hosts(dict.fromkeys(world.host_of(k) for k in late if k < world.np))
        why = "the World's processes ended" if world.lifeline_ended() else \
            f"within the start's limit for this size ({world.budget.total_s:.0f} s)"
        raise MlpMagicError(f"ranks {fold_ranks(late)} on {hosts} did not finish {what} {why}; "
                            f"logs in {world.workdir}")
    return {rank: pending[rank].get(0) for rank in job.ranks}


def failure_line(failed: dict, host_of, step: str, workdir) -> str:
    """{rank: exception} -> one line: each cause once, with its ranks and their hosts."""
    causes = grouped_causes({rank: one_line(error) for rank, error in failed.items()}, host_of)
    where = f"; logs in {workdir}" if workdir else ""
    return f"the World did not start: {step} failed on {causes}{where}"
