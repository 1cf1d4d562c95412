"""Settings read from the environment, in one place."""
from __future__ import annotations

import pytest

from mlp_magic import config
from mlp_magic.errors import MlpMagicError


@pytest.mark.parametrize("raw, days", [("", 30.0), ("0", 0.0), ("7", 7.0), (" 0.5 ", 0.5)])
def test_keep_days_from_the_environment(raw, days):
    assert config.log_keep_days({config.LOG_KEEP_DAYS: raw}) == days
    assert config.log_keep_days({}) == config.DEFAULT_LOG_KEEP_DAYS


@pytest.mark.parametrize("raw", ["-1", "a week", "nan", "inf"])
def test_a_bad_keep_days_value_is_named(raw):
    with pytest.raises(MlpMagicError, match=f"MLP_MAGIC_LOG_KEEP_DAYS={raw!r}: expected a number of days"):
        config.log_keep_days({config.LOG_KEEP_DAYS: raw})
