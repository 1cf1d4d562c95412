"""How a cell ended (Outcome), as its results and summary.json say it."""
from __future__ import annotations

import pytest

from mlp_magic.core import results
from mlp_magic.mpirun.cell import Outcome


@pytest.mark.parametrize("outcome, status", [
    (Outcome.TIMEOUT, results.TIMEOUT), (Outcome.INTERRUPTED, results.INTERRUPTED),
    (Outcome.DIED, results.DIED)])
def test_a_rank_unfinished_when_the_cell_ended_gets_the_outcome_as_its_status(outcome, status):
    assert outcome.unfinished_status == status
    assert Outcome(outcome.value) is outcome   # summary.json stores the value
