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


def test_the_ssh_command_option_then_the_environment_then_a_default():
    env = {"MLP_MAGIC_SSH": "ssh -F '/tmp/my cfg'"}
    assert config.ssh_command("myssh -p 2", env) == ["myssh", "-p", "2"]
    assert config.ssh_command(("ssh", "-q"), env) == ["ssh", "-q"]
    assert config.ssh_command(None, env) == ["ssh", "-F", "/tmp/my cfg"]
    assert config.ssh_command(None, {}) == ["ssh"] and config.ssh_command(None, {}, default=None) is None
    with pytest.raises(MlpMagicError, match="--ssh: empty ssh command"):
        config.ssh_command("  ", env)


def test_paths_follow_the_home_setting():
    env = {"MLP_MAGIC_HOME": "/data/mm"}
    assert (config.log_root(None, env), config.state_dir(env)) == ("/data/mm/logs", "/data/mm/worlds")
    assert config.log_root("/x", {**env, "MLP_MAGIC_LOG_DIR": "/y"}) == "/x"
    assert config.log_root(None, {**env, "MLP_MAGIC_LOG_DIR": "/y"}) == "/y"
    assert config.mpiexec_setting({"MLP_MAGIC_MPIEXEC": "NONE"}) == "none"
    assert config.controller_address({"MLP_HOST": "10.0.0.2"}) == ("MLP_HOST", "10.0.0.2")
    assert config.controller_address({"MLP_HOST": "a", "MLP_MAGIC_CONTROLLER_IP": "b"}) == (
        "MLP_MAGIC_CONTROLLER_IP", "b")


@pytest.mark.parametrize("raw, size", [("", 64 << 20), ("1000", 1000), ("64M", 64 << 20), ("64MiB", 64 << 20),
                                       ("2 GB", 2 << 30), ("1.5k", 1536)])
def test_pull_cap_from_the_environment(raw, size):
    assert config.pull_cap({config.PULL_CAP: raw}) == size


@pytest.mark.parametrize("raw", ["0", "-1", "x", "64Q", "1e3", "nan", "9" * 30])
def test_a_bad_pull_cap_is_named(raw):
    with pytest.raises(MlpMagicError, match=f"MLP_MAGIC_PULL_CAP={raw!r}: expected a size"):
        config.pull_cap({config.PULL_CAP: raw})
