"""doctor/links: what the link test's ranks printed, read back into the report (no ranks are
started: their output is handed in as mpiexec would pass it on)."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from hypothesis import example, given

from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.doctor import links
from mlp_magic.doctor.pure.report import Report
from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import dumps, hostile, replaced

# rank 0's line on hosts a, b, c (two ranks each: leaders 0, 2, 4)
ANSWER = {"rank": 0, "backend": "gloo", "ranks": 6, "bytes": 16777216, "seconds": 0.01,
          "pairs": [[0, 2, 5e9], [0, 4, 5.5e9], [2, 4, 1e9]]}
OPTIONS = SimpleNamespace(np=None, links_backend="mpi", size_mb=16.0, timeout=10.0, fraction=0.5)


class Ranks:
    """What ``_start`` gives: one finished process, its output already there."""

    def __init__(self, stdout: str):
        self.stdout, self.pid = stdout, 0

    def communicate(self, timeout=None):
        return self.stdout, ""

    def poll(self):
        return 0

    def wait(self):
        return 0


def measured(stdout: str) -> Report:
    report = Report(("a", "b", "c"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(links, "_start", lambda *args: [Ranks(stdout)])
        links.run_links(report, topology_from_environment({}, hosts="a:2,b:2,c:2"), OPTIONS, {})
    return report


def test_the_ranks_answer_becomes_the_links_line_and_the_slow_pair():
    report = measured("[1,0]<stdout>: " + json.dumps(ANSWER) + "\n")
    assert report.links["pairs"][2] == {"hosts": ["b", "c"], "gbps": 1.0}
    assert [f.hosts for f in report.findings if f.title == "slow pair"] == [("b", "c")]


FAILED = {"error": "rank 1: RuntimeError: Connection refused"}


@FUZZ
@given(hostile(ANSWER) | hostile(FAILED))
@example(replaced(ANSWER, ("seconds",), float("nan")))   # old code: ValueError from algbw
@example(replaced(ANSWER, ("ranks",), "12"))   # old code: TypeError in busbw
@example(replaced(ANSWER, ("pairs", 0, 0), [None]))   # old code: "TypeError: unhashable type: 'list'"
@example(replaced(FAILED, ("error",), 0.5))   # old code: TypeError (0.5 + "")
def test_a_hostile_answer_is_one_finding_never_a_traceback(doc):
    """What the ranks printed is JSON of any shape (another version's ranks, a rank's own print):
    the report gets the links measured, or one error finding that says what was wrong (not a
    Python exception's words)."""
    report = measured(dumps(doc) + "\n")
    assert report.text and report.html
    json.dumps(report.to_json(), allow_nan=False)
    errors = [f for f in report.findings if f.title == "collective test"]
    assert (report.links is None) == bool(errors)
    for finding in errors:
        assert isinstance(finding.detail, str) and "\n" not in finding.detail
        assert not re.match(r"(Type|Value|Key|Attribute|Overflow|Index|ZeroDivision)Error", finding.detail)
