"""respawn/pure/plan: which dead ranks ``%mpirun --respawn`` starts again, the rank --copy copies
from, and the lines that say what was refused, what started and what a new rank still lacks."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.core.ranges import fold_ranks, parse_ranks
from mlp_magic.errors import MlpMagicError
from mlp_magic.respawn.pure.plan import (LACKS_LISTED, chosen_dead, copy_source, lacks_lines,
                                         missing_names_line, names_listed, respawned_line)

HINT = "(`%mpirun --respawn --copy NAMES` copies values; or run their cells with --ranks {})"


def error_of(function, *args) -> str:
    with pytest.raises(MlpMagicError) as caught:
        function(*args)
    return str(caught.value)


def host_of_table(table: dict):
    return lambda rank: table[rank]


# ---------------------------------------------------------------- chosen_dead

def test_chosen_dead_refuses_when_nothing_is_dead():
    message = error_of(chosen_dead, [], None, {}, host_of_table({}))
    assert message == "%mpirun --respawn: no rank is dead; nothing to start again"


def test_chosen_dead_refuses_when_nothing_is_dead_even_with_ranks_chosen():
    message = error_of(chosen_dead, [], [1], {}, host_of_table({1: "h"}))
    assert message == "%mpirun --respawn: no rank is dead; nothing to start again"


def test_chosen_dead_refuses_one_live_rank_by_name():
    hosts = host_of_table({rank: "h" for rank in range(6)})
    message = error_of(chosen_dead, [2, 5], [1, 2], {}, hosts)
    assert message == "%mpirun --respawn --ranks: rank 1 is alive; the dead are 2,5"


def test_chosen_dead_refuses_several_live_ranks_folded():
    hosts = host_of_table({rank: "h" for rank in range(6)})
    message = error_of(chosen_dead, [5, 2, 3, 4], [0, 1, 3], {}, hosts)
    assert message == "%mpirun --respawn --ranks: ranks 0-1 are alive; the dead are 2-5"


def test_chosen_dead_refuses_a_rank_on_a_host_that_stopped_answering():
    hosts = host_of_table({0: "a", 1: "b", 2: "b"})
    message = error_of(chosen_dead, [1, 2], None, {"b": "no heartbeat"}, hosts)
    assert message == ("%mpirun --respawn: b stopped answering, so no rank can start there: "
                       "`%mpirun --restart` starts the World again once it answers")


def test_chosen_dead_names_every_lost_host_once_sorted():
    hosts = host_of_table({0: "zeta", 1: "alpha", 2: "zeta", 3: "mid"})
    message = error_of(chosen_dead, [0, 1, 2, 3], None, {"zeta": 1, "alpha": 1}, hosts)
    assert message.startswith("%mpirun --respawn: alpha, zeta stopped answering, so no rank can start there")
    assert "mid" not in message


def test_chosen_dead_checks_live_ranks_before_lost_hosts():
    hosts = host_of_table({0: "a", 1: "b"})
    message = error_of(chosen_dead, [1], [0, 1], {"b": 1}, hosts)
    assert message == "%mpirun --respawn --ranks: rank 0 is alive; the dead are 1"


def test_chosen_dead_ignores_a_lost_host_of_a_dead_rank_not_chosen():
    hosts = host_of_table({1: "lost", 2: "fine"})
    assert chosen_dead([1, 2], [2], {"lost": 1}, hosts) == [2]


@pytest.mark.parametrize("chosen", [None, []])
def test_chosen_dead_without_ranks_takes_every_dead_rank_sorted(chosen):
    hosts = host_of_table({rank: "h" for rank in range(10)})
    assert chosen_dead([7, 1, 4], chosen, {}, hosts) == [1, 4, 7]


def test_chosen_dead_takes_the_chosen_ranks_sorted():
    hosts = host_of_table({rank: "h" for rank in range(10)})
    assert chosen_dead([1, 4, 7, 9], [9, 4], {}, hosts) == [4, 9]


@st.composite
def dead_and_chosen(draw):
    np = draw(st.integers(min_value=1, max_value=24))
    dead = draw(st.lists(st.integers(0, np - 1), min_size=1, unique=True))
    chosen = draw(st.one_of(st.none(), st.lists(st.sampled_from(sorted(dead)), min_size=1, unique=True)))
    hosts = {rank: draw(st.sampled_from(["h0", "h1", "h2", "h3"])) for rank in range(np)}
    return np, dead, chosen, hosts


@given(dead_and_chosen(), st.sets(st.sampled_from(["h0", "h1", "h2", "h3"])))
@settings(max_examples=300)
def test_chosen_dead_is_a_sorted_subset_of_the_dead_unless_a_host_is_lost(case, lost):
    np, dead, chosen, hosts = case
    taken = chosen if chosen else dead
    gone = sorted({hosts[rank] for rank in taken} & lost)
    if gone:
        message = error_of(chosen_dead, dead, chosen, {host: "lost" for host in lost}, host_of_table(hosts))
        assert message.startswith(f"%mpirun --respawn: {', '.join(gone)} stopped answering")
        return
    ranks = chosen_dead(dead, chosen, {host: "lost" for host in lost}, host_of_table(hosts))
    assert ranks == sorted(ranks)
    assert set(ranks) <= set(dead)
    assert ranks == sorted(taken)
    assert all(hosts[rank] not in lost for rank in ranks)


@given(dead_and_chosen(), st.data())
@settings(max_examples=300)
def test_chosen_dead_never_returns_a_live_rank(case, data):
    np, dead, chosen, hosts = case
    live = sorted(set(range(np)) - set(dead))
    if not live:
        return
    extra = data.draw(st.lists(st.sampled_from(live), min_size=1, unique=True))
    picked = list(chosen or ()) + extra
    message = error_of(chosen_dead, dead, picked, {}, host_of_table(hosts))
    assert message.startswith("%mpirun --respawn --ranks: ")
    assert message.endswith(f"; the dead are {fold_ranks(dead)}")
    named = message.split("--ranks: ", 1)[1].split(" is alive")[0].split(" are alive")[0]
    assert named == (f"rank {extra[0]}" if len(extra) == 1 else f"ranks {fold_ranks(extra)}")


# ---------------------------------------------------------------- copy_source

@pytest.mark.parametrize("names", [None, ()])
def test_copy_source_refuses_from_without_copy(names):
    message = error_of(copy_source, [0, 1], names, 1, 4)
    assert message == "%mpirun --respawn --from RANK names where --copy copies from: give --copy NAMES too"


def test_copy_source_refuses_a_rank_beyond_the_world():
    message = error_of(copy_source, [0, 1, 3], ("model",), 4, 4)
    assert message == "%mpirun --respawn --from 4: the World has ranks 0-3"


def test_copy_source_refuses_a_dead_rank():
    message = error_of(copy_source, [3, 0, 1], ("model",), 2, 4)
    assert message == "%mpirun --respawn --from 2: rank 2 is dead; the live ranks are 0-1,3"


def test_copy_source_checks_the_world_size_before_the_dead():
    assert "the World has ranks 0-1" in error_of(copy_source, [0], ("x",), 7, 2)


@pytest.mark.parametrize("names", [None, ()])
def test_copy_source_without_copy_is_none(names):
    assert copy_source([0, 1], names, None, 4) is None


def test_copy_source_defaults_to_the_lowest_live_rank():
    assert copy_source([5, 2, 3], ("model", "opt"), None, 6) == 2


def test_copy_source_takes_a_live_from_rank():
    assert copy_source([0, 2, 3], ("model",), 3, 4) == 3


@given(st.integers(1, 16).flatmap(lambda np: st.tuples(
    st.just(np), st.lists(st.integers(0, np - 1), min_size=1, unique=True), st.integers(0, 2 * np))))
@settings(max_examples=300)
def test_copy_source_gives_a_live_rank_or_one_refusal(case):
    np, live, source = case
    try:
        chosen = copy_source(live, ("x",), source, np)
    except MlpMagicError as error:
        assert str(error).startswith(f"%mpirun --respawn --from {source}: ")
        assert source >= np or source not in live
        return
    assert chosen == source and chosen in live and chosen < np


# ---------------------------------------------------------------- missing_names_line and names_listed

def test_missing_names_line_is_empty_when_the_source_holds_every_name():
    assert missing_names_line(("model", "opt"), ["opt", "model", "step"], 0) == ""


def test_missing_names_line_refuses_a_module_as_no_value_to_copy():
    assert missing_names_line(("torch", "model"), ["model", "+torch"], 1) == (
        "%mpirun --respawn --copy: torch is a module on rank 1, not a value to copy: an import on the new "
        "ranks makes it; nothing was started")


def test_missing_names_line_names_what_is_missing_in_the_order_given():
    line = missing_names_line(("zeta", "model", "alpha"), ["model", "step", "+os"], 2)
    assert line == ("%mpirun --respawn --copy: rank 2 has no zeta, alpha; nothing was started "
                    "(its names: model, step)")


def test_missing_names_line_says_none_when_the_source_holds_only_modules():
    line = missing_names_line(("model",), ["+os", "+torch"], 0)
    assert line == "%mpirun --respawn --copy: rank 0 has no model; nothing was started (its names: none)"


def test_missing_names_line_lists_at_most_eight_of_the_source_names():
    held = [f"v{index}" for index in range(12)]
    line = missing_names_line(("model",), held, 0)
    assert line.endswith("(its names: v0, v1, v2, v3, v4, v5, v6, v7, ...)")


@given(st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=6, unique=True),
       st.lists(st.sampled_from([*"abcdefghij", *(f"+{c}" for c in "abcdefghij")]), unique=True),
       st.integers(0, 99))
@settings(max_examples=300)
def test_missing_names_line_names_exactly_the_missing(names, held, source):
    line = missing_names_line(tuple(names), held, source)
    modules = [name for name in names if f"+{name}" in held]
    if modules:   # refused first: a module is no value to copy
        assert line.startswith(f"%mpirun --respawn --copy: {', '.join(modules)} ")
        return
    missing = [name for name in names if name not in held]
    if not missing:
        assert line == ""
        return
    head = f"%mpirun --respawn --copy: rank {source} has no "
    assert line.startswith(head)
    assert line[len(head):].split("; nothing was started")[0].split(", ") == missing
    listed = line.split("(its names: ")[1].rstrip(")")
    assert not any(name.startswith("+") for name in listed.split(", "))


@pytest.mark.parametrize("names, shown", [
    ([], "none"),
    (["a"], "a"),
    (["a", "b"], "a, b"),
    ([f"n{i}" for i in range(8)], "n0, n1, n2, n3, n4, n5, n6, n7"),
    ([f"n{i}" for i in range(9)], "n0, n1, n2, n3, n4, n5, n6, n7, ..."),
])
def test_names_listed(names, shown):
    assert names_listed(names) == shown


@given(st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), max_size=20))
def test_names_listed_shows_the_first_eight_and_says_the_rest(names):
    shown = names_listed(names)
    if not names:
        assert shown == "none"
        return
    parts = shown.split(", ")
    if len(names) > LACKS_LISTED:
        assert parts == names[:LACKS_LISTED] + ["..."]
    else:
        assert parts == names


# ---------------------------------------------------------------- respawned_line

def test_respawned_line_for_one_rank():
    assert respawned_line({2: 123}, 2.06, 4) == (
        "rank 2 (pid 123) started again in 2.1 s: `comm` is a communicator of all 4 ranks "
        "(MPI.COMM_WORLD cannot be repaired: use `comm`)")


def test_respawned_line_orders_the_ranks():
    line = respawned_line({5: 50, 1: 10, 3: 30}, 0.0, 8)
    assert line.startswith("rank 1 (pid 10), rank 3 (pid 30), rank 5 (pid 50) started again in 0.0 s: ")
    assert "all 8 ranks" in line


# ---------------------------------------------------------------- lacks_lines

def test_lacks_lines_groups_ranks_lacking_the_same_names():
    held = {0: ["model", "opt", "+os"], 2: ["model"], 3: ["model"], 5: []}
    assert lacks_lines(held, 0, [3, 2, 5]) == [
        "ranks 2-3 lack 1 name that rank 0 has: opt; and imports os " + HINT.format("2-3"),
        "rank 5 lacks 2 names that rank 0 has: model, opt; and imports os " + HINT.format("5"),
    ]


def test_lacks_lines_only_imports():
    held = {1: ["+os", "+torch"], 4: []}
    line = "rank 4 lacks imports that rank 1 has: os, torch (run their imports with --ranks 4)"
    assert lacks_lines(held, 1, [4]) == [line]


def test_lacks_lines_only_values():
    held = {0: ["a", "b", "c"], 1: ["b"]}
    assert lacks_lines(held, 0, [1]) == ["rank 1 lacks 2 names that rank 0 has: a, c " + HINT.format("1")]


def test_lacks_lines_says_the_count_and_lists_eight():
    values = [f"v{index}" for index in range(12)]
    line, = lacks_lines({0: values, 1: []}, 0, [1])
    assert line.startswith("rank 1 lacks 12 names that rank 0 has: v0, v1, v2, v3, v4, v5, v6, v7, ... (")


def test_lacks_lines_is_empty_when_every_new_rank_holds_what_the_source_has():
    held = {0: ["model", "+os"], 1: ["+os", "model", "extra"], 2: ["model", "+os"]}
    assert lacks_lines(held, 0, [1, 2]) == []


def test_lacks_lines_takes_a_rank_not_answered_as_holding_nothing():
    assert lacks_lines({0: ["x"]}, 0, [3]) == ["rank 3 lacks 1 name that rank 0 has: x " + HINT.format("3")]


def test_lacks_lines_says_nothing_when_the_source_holds_nothing():
    assert lacks_lines({1: ["x"]}, 0, [1]) == []


LINE = re.compile(
    r"(?:rank (?P<one>\d+) lacks|ranks (?P<many>[0-9,-]+) lack) "
    r"(?:(?P<count>\d+) names? that rank (?P<source>\d+) has: (?P<values>[^;(]+?)"
    r"(?:; and imports (?P<mods>[^(]+))?"
    r"|imports that rank (?P<msource>\d+) has: (?P<only>[^(]+)) "
    r"\((?:`%mpirun --respawn --copy NAMES` copies values; or run their cells|run their imports) "
    r"with --ranks (?P<fold>[0-9,-]+)\)")

VALUES = ["model", "opt", "loader", "step", "lr", "data", "net", "x", "y", "z", "w"]
MODULES = ["+os", "+torch", "+np"]


def listed(text: str) -> tuple:
    """("a, b, ...") -> (["a", "b"], True)"""
    parts = text.split(", ")
    return (parts[:-1], True) if parts[-1] == "..." else (parts, False)


def expect_listed(text: str, names: list) -> None:
    shown, more = listed(text)
    assert shown == names[:LACKS_LISTED]
    assert more == (len(names) > LACKS_LISTED)


@st.composite
def lacks_case(draw):
    source = draw(st.integers(0, 3))
    source_names = draw(st.lists(st.sampled_from(VALUES + MODULES), unique=True, max_size=14))
    new_ranks = draw(st.lists(st.integers(4, 20), unique=True, min_size=1, max_size=8))
    held = {source: source_names}
    for rank in new_ranks:
        if draw(st.booleans()):   # a rank that answered
            pool = st.sampled_from(source_names + ["extra", "+json"]) if source_names else st.just("extra")
            held[rank] = draw(st.lists(pool, unique=True))
    return held, source, new_ranks


@given(lacks_case())
@settings(max_examples=400)
def test_lacks_lines_matches_a_model_of_what_each_rank_lacks(case):
    held, source, new_ranks = case
    expected = {}
    for rank in new_ranks:
        missing = tuple(name for name in held[source] if name not in held.get(rank, []))
        if missing:
            expected.setdefault(missing, []).append(rank)
    lines = lacks_lines(held, source, new_ranks)
    assert len(lines) == len(expected)   # one line per distinct missing set
    seen = []
    for line, (missing, ranks) in zip(lines, expected.items()):
        match = LINE.fullmatch(line)
        assert match, line
        named = [int(match["one"])] if match["one"] else parse_ranks(match["many"])
        assert named == sorted(ranks) and parse_ranks(match["fold"]) == sorted(ranks)
        assert (match["one"] is not None) == (len(ranks) == 1)
        seen += named
        values = [name for name in missing if not name.startswith("+")]
        modules = [name[1:] for name in missing if name.startswith("+")]
        if values:
            assert int(match["source"]) == source and int(match["count"]) == len(values)
            assert (" names that" in line) == (len(values) != 1)
            expect_listed(match["values"], values)
            if modules:
                expect_listed(match["mods"], modules)
            else:
                assert match["mods"] is None
        else:
            assert int(match["msource"]) == source and modules
            expect_listed(match["only"], modules)
        for rank in named:   # never a name that rank holds
            mine = held.get(rank, [])
            modules_shown = listed(match["mods"] or match["only"] or "")[0]
            shown = listed(match["values"] or "")[0] + ["+" + module for module in modules_shown]
            assert not set(shown) & set(mine)
    assert sorted(seen) == sorted(rank for ranks in expected.values() for rank in ranks)
    assert len(seen) == len(set(seen))   # each rank in one line only


def test_a_rank_whose_exit_mpi_never_heard_of_is_refused_naming_it():
    from mlp_magic.respawn.pure.plan import refuse_unheard

    dead = {1: "was killed by a signal", 2: "exited with status 3"}
    refuse_unheard([1], dead, "exited with status")   # heard of: nothing to say
    with pytest.raises(MlpMagicError) as refused:
        refuse_unheard([1, 2], dead, "exited with status")
    assert str(refused.value).startswith(
        "%mpirun --respawn: rank 2 exited with status 3, which Open MPI never tells the other ranks of")
