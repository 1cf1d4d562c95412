"""Which SystemExit ends a rank's cell well: Python's own reading of an exit status."""
import pytest

from mlp_magic.engine.exits import ends_well


@pytest.mark.parametrize("error, expected", [
    (SystemExit(), True), (SystemExit(0), True), (SystemExit(None), True),
    (SystemExit(3), False), (SystemExit("bad input"), False), (SystemExit(False), True),
    (KeyboardInterrupt(), False), (ValueError(0), False), (None, False),
])
def test_ends_well(error, expected):
    assert ends_well(error) is expected
