"""The straggler named by when each rank entered each collective."""
from hypothesis import given, strategies as st

from mlp_magic.profile.pure.arrivals import CHANCE, LATE_S, by_chance, matched, straggler, waits_of


def entered(times: dict, op: str = "all_reduce", group: str = "0") -> dict:
    """{rank: [entries]} from {rank: [seconds, one per collective]}."""
    return {rank: [{"group": group, "seq": i + 1, "op": op, "t": t} for i, t in enumerate(ts)]
            for rank, ts in times.items()}


def test_the_rank_last_at_every_collective_is_named_with_how_late_and_who_waited():
    times = {r: [10.0 * i + (0.2 if r == 2 else 0.01 * r) for i in range(6)] for r in range(4)}
    verdict = straggler(matched(entered(times)))
    assert verdict.straggler == 2
    assert verdict.lines[0] == ("rank 2 entered last at 6 of 6 collectives (all_reduce #1-6), 190 ms late "
                                "(median)")
    assert verdict.lines[1] == "ranks 0-1,3 (3) waited 1.14 s each (median) in all_reduce for rank 2"


def test_no_rank_late_is_said_so():
    times = {r: [float(i) + 0.0001 * r for i in range(5)] for r in range(4)}
    verdict = straggler(matched(entered(times)))
    assert verdict.straggler is None and verdict.lines[0].startswith("no rank was late: at each of 5")


def test_a_last_rank_that_changes_is_no_straggler():
    times = {r: [float(i) + (0.3 if r == i % 4 else 0.0) for i in range(8)] for r in range(4)}
    verdict = straggler(matched(entered(times)))
    assert verdict.straggler is None
    assert verdict.lines[0].startswith("no one straggler: the late rank changed (rank 0 at 2, rank 1 at 2, ")


def test_only_collectives_every_rank_entered_count():
    found = entered({0: [1.0, 2.0], 1: [1.5]})
    assert [c.seq for c in matched(found)] == [1]
    assert matched({0: found[0]}) == []   # one rank: nobody to wait for


@given(st.integers(2, 16), st.integers(1, 12), st.data())
def test_a_rank_always_later_than_the_others_is_the_straggler(size, count, data):
    late = data.draw(st.integers(0, size - 1))
    delay = data.draw(st.floats(LATE_S * 2, 5.0))
    jitter = st.floats(0, LATE_S / 4)
    times = {r: [100.0 * i + data.draw(jitter) + (delay if r == late else 0.0) for i in range(count)]
             for r in range(size)}
    collectives = matched(entered(times))
    told = by_chance(count, count, size) <= CHANCE   # too few collectives: chance could do it
    assert straggler(collectives).straggler == (late if told else None)
    waits = waits_of(collectives)
    assert waits[late] == 0.0 and all(waits[r] > 0 for r in range(size) if r != late)


def test_one_late_start_is_no_straggler():
    """The first collective after the cell began: each rank began it at its own moment."""
    times = {r: [0.3 if r == 1 and i == 0 else float(i) for i in range(8)] for r in range(4)}
    verdict = straggler(matched(entered(times)))
    assert verdict.straggler is None
    assert verdict.lines == ("no straggler: rank 1 entered late at only 1 of 8 collectives",)


def test_a_rank_last_about_as_often_as_chance_makes_it_is_not_named():
    """On a loaded host: every collective a few ms late, the last rank at random."""
    order = [1, 1, 1, 0, 2, 3]   # rank 1 last at 3 of 6, as one of 4 ranks is half the time
    times = {r: [float(i) + (0.01 if r == order[i] else 0.0) for i in range(6)] for r in range(4)}
    verdict = straggler(matched(entered(times)))
    assert verdict.straggler is None
    assert verdict.lines[0].startswith("no straggler named: rank 1 entered last at 3 of 6 collectives, "
                                       "which chance alone would do "), verdict.lines
    assert by_chance(6, 6, 4) < CHANCE < by_chance(5, 6, 4)
