"""RankJob.interrupt waits only for the ranks it interrupted: a dead rank (skipped: the World
survived its death) never ends its request, and counting it made every interrupt after a death
wait out its whole grace (benchmarks/rank_death.py: 1.2 s of the cell's return at 4 ranks)."""
from types import SimpleNamespace

from mlp_magic.client.job import RankJob


class Requests:
    """The job's requests as the interrupt sees them: ranks 0, 1 and 3 end when interrupted,
    rank 2 (dead) never does. ``waits`` records what each wait counted as still to come."""

    def __init__(self):
        self.left, self.waits = {0, 1, 2, 3}, []

    def unfinished(self):
        return sorted(self.left)

    def done(self):
        return not self.left

    def wait_while_stopping(self, grace, ranks=None):
        counted = set(self.left if ranks is None else self.left.intersection(ranks))
        self.waits.append(counted)   # a wait with something left in it lasts its whole grace


def a_job():
    requests = Requests()
    world = SimpleNamespace(ranks_per_cpu=1.0, rank_to_engine={rank: rank for rank in range(4)},
                            interrupt=lambda jobs: requests.left.difference_update(jobs.keys() - {2}) or True)
    job = object.__new__(RankJob)
    job.world, job.requests = world, requests
    job.msg_id = lambda rank: f"m{rank}"
    return job, requests


def test_a_dead_ranks_request_does_not_hold_the_interrupts_wait():
    job, requests = a_job()
    assert job.interrupt(grace=1.0, skip=frozenset({2})) is False   # rank 2's request never ends
    assert requests.unfinished() == [2]
    assert requests.waits == [set()]   # nothing left of those interrupted: no grace waited out
