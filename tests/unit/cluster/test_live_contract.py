"""cluster/live: the document's contract (README) held by design, not by a timing assert.

"A World whose kernel is gone leaves the document within 15 s": the kernels are checked every
LIVENESS_EVERY_S and a dead one's World is dropped at that check, so one interval, plus the
reading of the Worlds' folder, must fit in 15 s with room for a loaded machine. The server test
(tests/server/test_live.py) shows that it does leave, under a hang bound."""
from pathlib import Path

from mlp_magic.cluster.live import LIVENESS_EVERY_S

CONTRACT_S = 15.0
README = Path(__file__).resolve().parents[3] / "docs" / "reference" / "rest.md"


def test_a_dead_kernels_world_is_checked_often_enough_to_leave_within_the_contract():
    assert LIVENESS_EVERY_S * 2 <= CONTRACT_S
    assert f"A World whose kernel is gone leaves the document within {CONTRACT_S:g} s" in README.read_text()
