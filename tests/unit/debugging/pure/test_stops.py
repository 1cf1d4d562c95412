"""Breakpoints' pure part: which pdb commands go to the ranks, and where they stopped, grouped."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.ranges import fold_ranks
from mlp_magic.debugging.pure.stops import (QUITTING, REFUSED, RESUMING, group_positions, parse_command,
                                            position_text, source_lines, stops_text)
from mlp_magic.errors import MlpMagicError


def where(line, file="cell", function="<module>", source=None):
    around = [[n, f"line {n}"] for n in range(max(1, line - 2), line + 3)]
    return {"file": file, "line": line, "function": function, "source": around if source is None else source}


@pytest.mark.parametrize("text, word, resumes, quits", [
    ("p loss", "p", False, False),
    ("  n  ", "n", True, False),
    ("continue", "continue", True, False),
    ("unt 12", "unt", True, False),
    ("q", "q", False, True),
    ("!x = 1", "!", False, False),
    ("!x=1", "!", False, False),
    ("where", "where", False, False),
    ("p x;; n", "p", True, False),     # pdb runs both: the ranks move on
    ("p x;;q", "p", False, True),
])
def test_a_command_is_read_as_pdb_reads_it(text, word, resumes, quits):
    command = parse_command(text)
    assert (command.word, command.resumes, command.quits) == (word, resumes, quits)
    assert command.text == text.strip()


@pytest.mark.parametrize("text, part", [
    ("", "the command is empty"),
    ("   ", "the command is empty"),
    ("''", "the command is empty"),
    (";;", "the command is empty"),
    ("p 1\np 2", "one command per line"),
    ("interact", "'interact' cannot be sent to the ranks"),
    ("debug f()", "'debug' cannot be sent"),
    ("run", "restarts the program"),
    ("p 1;; interact", "'interact' cannot be sent"),
])
def test_a_command_no_rank_can_serve_is_one_line(text, part):
    with pytest.raises(MlpMagicError) as error:
        parse_command(text)
    assert part in str(error.value) and "\n" not in str(error.value)


def test_no_command_both_moves_on_and_quits_and_refused_ones_are_neither():
    assert not RESUMING & QUITTING and not set(REFUSED) & (RESUMING | QUITTING)


positions = st.builds(where, st.integers(1, 6), st.sampled_from(["cell", "/w/train.py"]),
                      st.sampled_from(["<module>", "step"]))


@given(st.dictionaries(st.integers(0, 511), positions, min_size=1, max_size=64))
def test_every_rank_is_in_exactly_one_group_of_one_position(wheres):
    groups = group_positions(wheres)
    ranks = [rank for members, _ in groups for rank in members]
    assert sorted(ranks) == sorted(wheres) and len(ranks) == len(set(ranks))
    keys = [(w["file"], w["line"], w["function"]) for _, w in groups]
    assert len(keys) == len(set(keys))
    for members, position in groups:
        assert members == sorted(members)
        assert all((wheres[r]["file"], wheres[r]["line"], wheres[r]["function"]) == keys[groups.index(
            (members, position))] for r in members)
    assert [members[0] for members, _ in groups] == sorted(members[0] for members, _ in groups)


@given(st.dictionaries(st.integers(0, 127), positions, min_size=1, max_size=32),
       st.sets(st.integers(128, 200), max_size=5), st.sets(st.integers(201, 300), max_size=5))
def test_the_text_names_every_group_once_and_the_others(wheres, running, finished):
    text = stops_text(wheres, running=running, finished=finished)
    for members, position in group_positions(wheres):
        assert text.count(f"stopped at {position_text(position)}") == 1
    if running:
        assert f"{fold_ranks(running)}" in text and "still running" in text
    if finished:
        assert f"{fold_ranks(finished)}" in text and "finished" in text


def test_four_ranks_at_one_line_read_as_one_group_with_their_source():
    text = stops_text({r: where(3, source=[[1, "x = rank * 2"], [2, "breakpoint()"], [3, "y = x + 1"]])
                       for r in range(4)}, finished=[4])
    assert text.splitlines() == ["ranks 0-3 (4) stopped at cell:3 <module>", "     1  x = rank * 2",
                                 "     2  breakpoint()", "  -> 3  y = x + 1", "rank 4 finished"]


def test_line_numbers_line_up_across_a_power_of_ten():
    lines = source_lines(where(10, source=[[9, "a"], [10, "b"], [11, "c"]]))
    assert lines == ["      9  a", "  -> 10  b", "     11  c"]
