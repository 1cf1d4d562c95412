"""doctor/pure/links: nccl-tests' bandwidth arithmetic, the rounds of host pairs, the slow ones."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.doctor.pure.report import Report
from mlp_magic.doctor.pure.links import add_link_findings, algbw, below, busbw, pair_rounds


def test_busbw_is_nccl_tests_factor():
    assert busbw(algbw(1e9, 0.5), 8) == pytest.approx(2e9 * 2 * 7 / 8)
    assert busbw(10.0, 1) == 0.0 and busbw(10.0, 2) == 10.0
    assert busbw(10.0, 4, "all_gather") == pytest.approx(7.5) and busbw(10.0, 4, "sendrecv") == 10.0
    with pytest.raises(ValueError):
        algbw(1, 0)


@given(st.integers(min_value=0, max_value=40))
def test_every_pair_once_in_rounds_of_disjoint_pairs(count):
    rounds = pair_rounds(count)
    pairs = [pair for found in rounds for pair in found]
    assert sorted(pairs) == [(a, b) for a in range(count) for b in range(a + 1, count)]
    for found in rounds:
        members = [m for pair in found for m in pair]
        assert len(members) == len(set(members))
    assert len(rounds) <= max(count, 1)


@given(st.dictionaries(st.integers(0, 50), st.floats(min_value=1, max_value=1e12), min_size=3, max_size=30),
       st.floats(min_value=0.01, max_value=1.0))
def test_below_a_share_of_the_median(values, fraction):
    import statistics

    median = statistics.median(values.values())
    assert below(values, fraction) == {k: v for k, v in values.items() if v < fraction * median}
    assert below(dict(list(values.items())[:2]), fraction) == {}


def test_a_slow_host_is_named_and_its_pairs_too():
    pairs = [["a", "b", 10e9], ["a", "c", 10e9], ["b", "c", 10e9],
             ["a", "d", 1e9], ["b", "d", 1e9], ["c", "d", 1e9]]
    # the median of the six is 5.5 GB/s: under half of it, d's three pairs
    report = Report(("a", "b", "c", "d"))
    add_link_findings(report, {"backend": "nccl", "ranks": 32, "bytes": 1 << 24, "seconds": 0.01,
                               "pairs": pairs}, 0.5)
    slow = [f for f in report.findings if f.title == "slow pair"]
    assert sorted(f.hosts for f in slow) == [("a", "d"), ("b", "d"), ("c", "d")]
    host = [f for f in report.findings if f.title == "slow host"]
    assert [f.hosts for f in host] == [("d",)] and host[0].severity == "error"
    assert report.links["busbw_gbps"] == pytest.approx((1 << 24) / 0.01 * 2 * 31 / 32 / 1e9, rel=1e-3)


def test_a_failed_test_is_one_error_finding():
    report = Report(("a",))
    add_link_findings(report, {"error": "rank 3: RuntimeError: Connection refused", "hosts": ["a"]}, 0.5)
    assert report.exit_status == 1 and report.findings[0].detail == "rank 3: RuntimeError: Connection refused"


def test_one_rank_leaves_the_links_untested_with_a_warning_not_an_error():
    # a host with one GPU (the lent H100): nothing to test, and nothing wrong with the host
    report = Report(("a",))
    skipped = {"skipped": "the link test needs 2 ranks or more: the job has 1", "hosts": ["a"]}
    add_link_findings(report, skipped, 0.5)
    assert [(f.severity, f.title) for f in report.findings] == [("warning", "links not tested")]
    assert report.exit_status == 0 and report.links is None
