"""world/pure/rank_states: the ranks' states as the waiting loop changes them, and what the faces say."""
from __future__ import annotations

import re
from datetime import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.world.pure.rank_states import (BUSY, DEAD, IDLE, PAUSED, STARTING, RankState, RankStates,
                                              age_text, by_host, iso, stragglers, summary_line)


def states(n: int = 4, now: float = 100.0) -> RankStates:
    made = RankStates([f"w{r // 2}" for r in range(n)], now)
    made.ready(now)
    return made


def test_ranks_start_starting_and_become_idle_when_ready():
    made = RankStates(["a", "a", "b"], 5.0)
    assert [r.state for r in made.rows] == [STARTING] * 3
    made.ready(7.0)
    assert [(r.state, r.since) for r in made.rows] == [(IDLE, 7.0)] * 3


def test_busy_until_every_request_on_the_rank_ended():
    made = states()
    made.sent([0, 1], 110.0)
    made.sent([0], 111.0)
    assert [r.state for r in made.rows] == [BUSY, BUSY, IDLE, IDLE]
    assert made.rows[0].since == 110.0   # a second request does not restart the clock
    made.ended(0, 112.0)
    assert made.rows[0].state == BUSY
    made.ended(0, 113.0)
    made.ended(1, 113.5)
    assert [(r.state, r.since) for r in made.rows[:2]] == [(IDLE, 113.0), (IDLE, 113.5)]


def test_paused_inside_its_request_busy_again_when_moved_on_idle_when_it_ends():
    made = states()
    made.sent([0, 1, 2], 110.0)
    made.paused(0, 111.0)
    made.paused(1, 111.5)
    made.paused(3, 111.6)   # an idle rank has no request to be stopped in
    assert [r.state for r in made.rows] == [PAUSED, PAUSED, BUSY, IDLE]
    made.resumed([0, 3], 112.0)
    assert [(r.state, r.since) for r in made.rows[:2]] == [(BUSY, 112.0), (PAUSED, 111.5)]
    made.ended(1, 113.0)    # `q` or `c` to the end: the request ends
    assert made.rows[1].state == IDLE and made.rows[1].requests == 0
    made.paused(2, 114.0)
    assert summary_line(made.rows, 120.0) == "4 ranks: 2 idle 7 s, 1 busy (rank 0), 1 paused (rank 2)"


def test_a_paused_rank_is_never_a_straggler():
    made = states(8)
    made.sent(list(range(8)), 100.0)
    for rank in range(7):
        made.ended(rank, 101.0)
    made.paused(7, 101.0)
    assert stragglers(made.rows, 500.0) == {}


def test_dead_stays_dead_and_starting_is_not_made_busy():
    made = RankStates(["a", "a"], 0.0)
    made.sent([0], 1.0)                     # the World's own start: not our requests
    assert made.rows[0].state == STARTING
    made.ready(2.0)
    made.died([1], 3.0)
    made.sent([1], 4.0)
    made.ended(1, 5.0)
    made.ready(6.0)
    assert (made.rows[1].state, made.rows[1].since) == (DEAD, 3.0)


def test_a_respawned_rank_is_idle_again_and_a_live_one_is_left_as_it_is():
    made = states(3)
    made.died([1], 3.0)
    made.sent([0], 4.0)
    made.revived([0, 1], 5.0)
    assert [(row.state, row.since) for row in made.rows[:2]] == [(BUSY, 4.0), (IDLE, 5.0)]
    made.sent([1], 6.0)
    assert made.rows[1].state == BUSY


def test_versions_count_changes_of_state_and_output_apart():
    made = states()
    version = made.version
    made.wrote(2, 120.0)
    assert (made.version, made.output_version, made.rows[2].last_output) == (version, 1, 120.0)
    made.sent([2], 121.0)
    made.sent([2], 121.5)   # no change of state
    assert made.version == version + 1


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(["sent", "ended", "died", "wrote", "revived"]), st.integers(0, 5)),
                max_size=60))
def test_any_sequence_keeps_the_rows_consistent(steps):
    made = states(6)
    for now, (what, rank) in enumerate(steps, start=200):
        getattr(made, what)([rank] if what in ("sent", "died", "revived") else rank, float(now))
    for row in made.rows:
        assert row.state in (IDLE, BUSY, DEAD)
        assert row.requests >= 0
        assert (row.state == BUSY) == (row.requests > 0 and row.state != DEAD)
        assert row.since <= 200 + len(steps)


def test_to_json_has_the_contract_fields_with_iso_times():
    made = states(2)
    made.wrote(1, 1764064800.25)
    rows = made.to_json()
    assert set(rows[0]) == {"rank", "host", "state", "since", "last_output"}
    assert rows[0]["last_output"] is None
    assert rows[1]["last_output"] == "2025-11-25T10:00:00.250+00:00"
    assert datetime.fromisoformat(rows[1]["since"]).timestamp() == 100.0


def test_iso_and_age_text():
    assert iso(None) is None
    assert age_text(43.9) == "43 s"
    assert age_text(750) == "12 min"
    assert age_text(7500) == "2 h 5 min"
    assert age_text(-3) == "0 s"


def rows_of(spec: str, now: float = 1000.0, since: float = 957.0) -> list:
    """'BBBI..' -> rows: B busy, I idle, D dead, S starting."""
    kinds = {"B": BUSY, "I": IDLE, "D": DEAD, "S": STARTING}
    return [RankState(r, f"w{r // 8}", kinds[c], since) for r, c in enumerate(spec)]


def test_summary_names_the_few_and_ages_the_many():
    rows = rows_of("B" * 512)
    rows[17].state = rows[301].state = IDLE
    assert summary_line(rows, 1000.0) == "512 ranks: 510 busy 43 s, 2 idle (ranks 17,301)"


def test_summary_of_one_state_one_rank_and_none():
    assert summary_line(rows_of("IIII"), 1000.0) == "4 ranks: 4 idle 43 s"
    assert summary_line(rows_of("B"), 1000.0) == "1 rank: 1 busy 43 s"
    assert summary_line([], 0.0) == "0 ranks"


def test_summary_folds_a_large_minority_or_leaves_it_unnamed():
    rows = rows_of("B" * 400 + "I" * 112)
    assert summary_line(rows, 1000.0) == "512 ranks: 400 busy 43 s, 112 idle (ranks 400-511)"
    scattered = rows_of("BI" * 256)
    scattered[0].state = IDLE
    assert summary_line(scattered, 1000.0) == "512 ranks: 257 idle 43 s, 255 busy"


@given(st.text(alphabet="BIDS", min_size=1, max_size=80))
def test_summary_counts_add_up(spec):
    line = summary_line(rows_of(spec), 1000.0)
    counts = [int(n) for n in re.findall(r"(?:: |, )(\d+) (?:busy|idle|dead|starting)", line)]
    assert sum(counts) == len(spec)
    assert line.startswith(f"{len(spec)} rank")


def test_a_rank_still_busy_after_most_finished_is_a_straggler():
    rows = rows_of("IIIBIIII", since=990.0)
    rows[3].since = 950.0
    assert stragglers(rows, 991.0) == {}            # finished a moment ago: give it time
    assert list(stragglers(rows, 1000.0)) == [3]
    assert "still busy 10 s" in stragglers(rows, 1000.0)[3]


def test_a_silent_rank_while_the_others_print_is_a_straggler():
    rows = rows_of("BBBB", since=0.0)
    for row in rows:
        row.last_output = 995.0
    rows[1].last_output = 900.0
    found = stragglers(rows, 1000.0)
    assert list(found) == [1] and found[1] == "silent 1 min while the others print"
    assert stragglers(rows_of("BBBB", since=0.0), 1000.0) == {}   # nobody prints: nothing to compare


def test_ranks_grouped_by_host_in_rank_order():
    grouped = by_host(rows_of("IIIIIIIIII"))
    assert list(grouped) == ["w0", "w1"]
    assert [r.rank for r in grouped["w1"]] == [8, 9]
