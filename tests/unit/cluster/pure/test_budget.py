"""cluster/pure/budget: a view's patches stay within their bytes a second; a lone one goes at once."""
import pytest
from hypothesis import given, strategies as st

from mlp_magic.cluster.pure.budget import SendBudget


def test_a_lone_patch_goes_at_once_and_a_large_one_is_never_held_whole():
    budget = SendBudget(25_000, 25_000, now=0.0)
    assert budget.wait(0.0) == 0
    budget.spent(0.0, 60_000)          # larger than the burst: it went
    assert budget.wait(0.0) == pytest.approx(35_000 / 25_000, rel=1e-6)   # the next waits
    assert budget.wait(1.41) == 0
    assert budget.wait(2.0) == 0


@given(st.lists(st.tuples(st.floats(0, 0.5), st.integers(1, 80_000)), min_size=1, max_size=200))
def test_sending_whenever_allowed_stays_within_burst_plus_rate(patches):
    """A sender that sends each patch as soon as the budget allows: over the whole run, at most
    burst + rate x time + the last patch (the one that may overdraw)."""
    rate, burst = 25_000.0, 25_000.0
    budget = SendBudget(rate, burst, now=0.0)
    now, sent = 0.0, 0
    for gap, size in patches:
        now += gap
        now += budget.wait(now)
        budget.spent(now, size)
        sent += size
    assert sent <= burst + rate * now + max(size for _, size in patches) + 1


def test_a_budget_needs_a_positive_rate():
    with pytest.raises(ValueError):
        SendBudget(0, 1, now=0.0)
