"""allrun's pure parts besides its options (tests/unit/commands/pure/test_parse_allrun.py): host
names and the ssh command, the exit status and the footer."""
from __future__ import annotations

import pytest

from mlp_magic.allrun.report import exit_status, footer
from mlp_magic.config import ssh_command
from mlp_magic.core.results import HostResult
from mlp_magic.errors import MlpMagicError
from mlp_magic.ssh.argv import as_target, as_targets


# ------------------------------------------------------------------ hosts and the ssh command


@pytest.mark.parametrize("name", ["worker0", "gpu-01.cluster", "10.0.0.7", "fe80::1", "node_3"])
def test_good_host_names(name):
    assert as_target(name).name == name


@pytest.mark.parametrize("name", ["a;b", "$(reboot)", "a b", "`id`", "-oProxyCommand=x", "", "a|b", "x'y"])
def test_host_names_with_shell_syntax_are_refused(name):
    with pytest.raises(MlpMagicError) as error:
        as_targets([name])
    assert repr(name) in str(error.value)


def test_user_at_host_and_duplicates():
    target = as_target("root@worker1")
    assert (target.user, target.name) == ("root", "worker1")
    with pytest.raises(MlpMagicError, match="bad;user"):
        as_target("bad;user@worker1")
    with pytest.raises(MlpMagicError, match="listed twice"):
        as_targets(["a", "a"])
    with pytest.raises(MlpMagicError, match="empty"):
        as_targets([])


def test_ssh_command_strings():
    assert ssh_command("ssh -F '/tmp/my cfg'") == ["ssh", "-F", "/tmp/my cfg"]
    assert ssh_command(("ssh", "-F", "c")) == ["ssh", "-F", "c"]
    with pytest.raises(MlpMagicError):
        ssh_command("ssh -F 'unclosed")
    with pytest.raises(MlpMagicError):
        ssh_command("")


# ------------------------------------------------------------------ exit status


def host(name, status="ok", code=0):
    return HostResult(name, status, code)


@pytest.mark.parametrize("results, expected", [
    ([host("a"), host("b")], 0),
    ([host("a"), host("b", "failed", 3)], 3),
    ([host("a", "failed", 1), host("b", "failed", 7)], 7),
    ([host("a", "failed", 3), host("b", "unreachable", 255)], 255),
    ([host("a"), host("b", "timeout", None)], 255),
    ([host("a", "failed", 3), host("b", "interrupted", None)], 130),
])
def test_exit_status(results, expected):
    assert exit_status(results) == expected


def test_footer_names_the_hosts_that_did_not_finish():
    results = [host("worker0"), host("worker1", "interrupted", None), host("worker2", "interrupted", None)]
    text = footer(results)
    assert "3 hosts" in text and "1 ok" in text and "2 interrupted" in text
    assert "not finished: worker[1-2]" in text
