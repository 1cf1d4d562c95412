"""Start deadlines follow the World's size; a -np beyond this machine's memory is refused."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.start_budget import RANK_MEMORY_BYTES, memory_shortfall, start_budget

GIB = 2**30
hosts = st.lists(st.integers(min_value=1, max_value=512), min_size=1, max_size=64)


def test_the_busiest_host_sets_the_pace():
    one_host = start_budget([128])
    spread = start_budget([8] * 16)           # the same 128 ranks on 16 hosts
    assert spread.total_s < one_host.total_s and spread.stall_s < one_host.stall_s
    assert start_budget([4]).total_s < start_budget([64]).total_s < one_host.total_s
    # 128 ranks on one 2-core machine measured ~60 s: the deadline leaves room, without being endless
    assert 120 < one_host.total_s < 600
    assert start_budget([]).total_s > 0


@given(hosts, st.integers(min_value=0, max_value=63))
def test_more_ranks_never_shorten_the_deadlines(counts, index):
    bigger = list(counts)
    bigger[index % len(bigger)] += 1
    before, after = start_budget(counts), start_budget(bigger)
    assert after.total_s >= before.total_s and after.stall_s >= before.stall_s
    assert before.stall_s < before.total_s


def test_ranks_that_fit_pass_and_those_that_do_not_get_one_sentence():
    assert memory_shortfall(128, 22 * GIB) is None
    assert memory_shortfall(0, 0) is None
    message = memory_shortfall(1000, 22 * GIB)
    assert message.startswith("1000 ranks on this machine need about 58.6 GiB")
    assert "only 22.0 GiB is available" in message and "at most 300 ranks fit here" in message


@given(st.integers(min_value=1, max_value=100_000), st.integers(min_value=0, max_value=2**42))
def test_the_refusal_is_exactly_when_the_ranks_exceed_the_usable_memory(ranks, available):
    refused = memory_shortfall(ranks, available) is not None
    assert refused == (ranks * RANK_MEMORY_BYTES > int(available * 0.8))
