"""What -o NAME stores, the same names for %%mpirun and %allrun (core.results.Results)."""
from __future__ import annotations

import pytest

from mlp_magic.core.results import (DIED, ERROR, FAILED, OK, UNREACHABLE, AllrunResult, HostResult,
                                    MpirunResult, RankResult, Results)


def ranks() -> MpirunResult:
    records = [RankResult(0, "w0", stdout="a\n"), RankResult(1, "w0", ERROR, stderr="boom\n"),
               RankResult(2, "w1", DIED)]
    return MpirunResult(records, "/logs/cell", None, "text", "<b>html</b>")


def hosts() -> AllrunResult:
    records = [HostResult("w0", OK, 0, "up\n"), HostResult("w1", FAILED, 3),
               HostResult("w2", UNREACHABLE, 255)]
    return AllrunResult(records, "text", "", 255)


@pytest.mark.parametrize("make, keys", [(ranks, [0, 1, 2]), (hosts, ["w0", "w1", "w2"])])
def test_both_commands_answer_to_the_same_names(make, keys):
    result = make()
    assert isinstance(result, Results) and len(result) == 3 and [r.key for r in result] == keys
    assert result[keys[0]].stdout in ("a\n", "up\n") and not result.ok
    assert result.failed == keys[1:]
    assert list(result.stdout) == keys and list(result.stderr) == keys
    with pytest.raises(KeyError):
        result["nowhere" if isinstance(keys[0], int) else 7]


def test_each_command_adds_its_own_facts():
    assert ranks().log_dir == "/logs/cell" and ranks()._repr_html_() == "<b>html</b>"
    assert repr(ranks()) == "<MpirunResult 3 ranks: 1 ok, 1 error, 1 died; logs in /logs/cell>"
    assert hosts().exit_status == 255 and hosts()._repr_html_() is None   # no HTML: the text repr
    assert repr(hosts()) == "<AllrunResult 3 hosts: 1 ok, 1 failed, 1 unreachable; exit status 255>"
    assert MpirunResult([RankResult(0, "w0")], "/l").ok and MpirunResult([], "/l").failed == []
