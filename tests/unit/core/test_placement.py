"""core/placement: where the launcher put the ranks, and which rank speaks for each host."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.placement import check_placement, first_rank_per_host
from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.errors import MlpMagicError


def test_placement_check_names_a_rank_the_launcher_put_elsewhere():
    layout = topology_from_environment({}, hosts="w0:2,w1:2").layout(4)
    good = {r: {"host": f"m{r // 2}", "launcher_local_rank": r % 2} for r in range(4)}
    check_placement(layout, good)  # as laid out: no error
    swapped = {**good, 1: {"host": "m0", "launcher_local_rank": 0}}
    expected = "rank 1 as local rank 0 on m0, but the layout expects local rank 1"
    with pytest.raises(MlpMagicError, match=expected):
        check_placement(layout, swapped)
    scattered = {**good, 1: {"host": "m9", "launcher_local_rank": 1}}
    with pytest.raises(MlpMagicError, match="ranks meant for w0 ran on several machines"):
        check_placement(layout, scattered)


def test_each_hosts_first_rank_speaks_for_it_in_layout_order():
    layout = topology_from_environment({}, hosts="w1:2,w0:3").layout(5)
    assert first_rank_per_host(layout) == {"w1": 0, "w0": 2}
    assert list(first_rank_per_host(layout)) == ["w1", "w0"]


@given(st.lists(st.integers(1, 4), min_size=1, max_size=6), st.randoms())
def test_the_first_rank_is_local_rank_zero_whatever_the_order(slots, random):
    hosts = ",".join(f"h{i}:{n}" for i, n in enumerate(slots))
    layout = topology_from_environment({}, hosts=hosts).layout(sum(slots))
    shuffled = list(layout)
    random.shuffle(shuffled)
    chosen = first_rank_per_host(shuffled)
    local_ranks = {host: layout[rank].local_rank for host, rank in chosen.items()}
    assert local_ranks == {f"h{i}": 0 for i in range(len(slots))}
