"""What the kernel and the server read of an agent's answer to a signal request (agent/signals)."""
from __future__ import annotations

from hypothesis import example, given

from mlp_magic.agent.signals import _taken
from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import hostile


def test_an_answer_names_the_ranks_signalled_and_the_deaf_ones():
    problems: dict = {}
    assert _taken({"signalled": [0, 1], "deaf": [2, 3]}, "w1", problems, "unblock") == [0, 1]
    assert problems == {"w1": "ranks 2-3 have no unblock thread (not an engine mlp_magic set up, or one of "
                              "an older mlp_magic): not signalled"}


@FUZZ
@given(hostile({"signalled": [0, 1], "deaf": [2]}))
@example({"signalled": [0], "deaf": [-1]})   # fold_ranks refused it: the whole send failed
@example({"signalled": 5})                   # list(5): TypeError
@example({"signalled": "ab"})                # read as the ranks "a" and "b"
def test_an_answer_of_another_version_names_only_ranks(answer):
    problems: dict = {}
    taken = _taken(answer, "w1", problems, "progress")
    assert all(type(rank) is int and rank >= 0 for rank in taken), taken
    assert set(problems) <= {"w1"}
