"""A cell's pure parts: how it ended (Outcome) and a rank's traceback as the groups compare it."""
from __future__ import annotations

import pytest

from mlp_magic.core import results
from mlp_magic.engine.capture import CELL_TAG
from mlp_magic.mpirun.cell_run import Outcome, plain_traceback


@pytest.mark.parametrize("outcome, status", [
    (Outcome.TIMEOUT, results.TIMEOUT), (Outcome.INTERRUPTED, results.INTERRUPTED),
    (Outcome.DIED, results.DIED)])
def test_a_rank_unfinished_when_the_cell_ended_gets_the_outcome_as_its_status(outcome, status):
    assert outcome.unfinished_status == status
    assert Outcome(outcome.value) is outcome   # summary.json stores the value


class RemoteError(Exception):
    def __init__(self, lines):
        super().__init__("remote")
        self.traceback = lines


def test_identical_failures_on_two_ranks_read_the_same():
    """Colours, execution counts and our trailing tag line differ between ranks for no reason."""
    def on_rank(count: int) -> RemoteError:
        return RemoteError(["\x1b[31mZeroDivisionError\x1b[0m  Traceback (most recent call last)",
                            f"Cell In[{count}], line 2", "      1 x = 1", f"      3 {CELL_TAG}/logs/c{count}",
                            "ZeroDivisionError: division by zero"])
    first, second = plain_traceback(on_rank(3)), plain_traceback(on_rank(17))
    assert first == second
    assert "\x1b" not in first and CELL_TAG not in first and "Cell, line 2" in first
    assert first.endswith("division by zero\n")
    assert plain_traceback(ValueError("no traceback attribute")) == "no traceback attribute\n"
