"""Progress bars read from what the ranks draw, and one line per group of ranks (output/pure/progress).
The bars are drawn by tqdm's own formatter: the format users' loops print."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tqdm import tqdm

from mlp_magic.output.pure.progress import Bar, ProgressBoard, current_piece, group_line, parse_bar

descs = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\r\n|"),
                max_size=20).map(str.strip)


@given(desc=descs, total=st.integers(1, 10**7), fraction=st.floats(0, 1), elapsed=st.floats(0, 10**4),
       scaled=st.booleans(), postfix=st.sampled_from(["", "loss=0.5", "v_num=0, train_loss=1.2e-03"]))
def test_tqdms_own_bar_is_read_back_whatever_its_description_and_counts(desc, total, fraction, elapsed,
                                                                        scaled, postfix):
    n = int(total * fraction)
    drawn = tqdm.format_meter(n, total, elapsed, prefix=desc, unit_scale=scaled, postfix=postfix or None)
    bar = parse_bar(drawn)
    assert bar is not None, drawn
    assert bar.desc == desc, drawn
    if not scaled:
        assert (bar.n, bar.total) == (n, total), drawn
    else:   # "1.23k": the count as shown, within its three digits
        assert abs(bar.n - n) <= max(1, n) * 0.01 and abs(bar.total - total) <= total * 0.01, drawn


@given(desc=descs, n=st.integers(0, 10**7), elapsed=st.floats(0, 10**4))
def test_a_bar_without_a_total_is_read_with_its_count(desc, n, elapsed):
    drawn = tqdm.format_meter(n, None, elapsed, prefix=desc)
    bar = parse_bar(drawn)
    assert bar is not None and bar.n == n and bar.total is None, drawn


@given(st.text(max_size=60))
def test_a_line_that_is_no_bar_is_none_or_a_bar_and_never_an_error(text):
    assert parse_bar(text) is None or isinstance(parse_bar(text), Bar)


def test_richs_bar_is_read_with_its_description_and_counts():
    drawn = ("Validation \x1b[38;2;98;6;224m━━━━━━━━━━━━\x1b[0m\x1b[38;5;237m╺━━━━━━━\x1b[0m 12/20 "
             "0:00:01 • 0:00:02 9.1it/s")
    assert parse_bar(drawn) == Bar("Validation", "12", "20")


def test_ordinary_output_is_no_bar():
    for line in ["step 10 loss 0.5", "epoch 3 done: 100 samples", "accuracy: 93%", "[rank 2] 4/5 ready"]:
        assert parse_bar(line) is None, line


def test_a_terminal_shows_the_last_piece_of_a_rewritten_line():
    assert current_piece("\repoch 0:  10%|#| 1/10\repoch 0:  20%|##| 2/10\r") == "epoch 0:  20%|##| 2/10"
    assert current_piece("plain") == "plain" and current_piece("\r\r") == ""


def drawn(desc: str, n: int, total: int = 50) -> Bar:
    return parse_bar(tqdm.format_meter(n, total, 1.0, prefix=desc))


def test_one_line_for_a_group_at_its_median_pace_with_the_slowest_rank_named():
    board = ProgressBoard()
    for rank, n in enumerate([31, 33, 22, 31]):
        board.update(rank, drawn("epoch 0", n))
    assert board.lines() == ["epoch 0 31/50 [######----] | ranks 0-3, slowest rank 2 at 22/50"]


def test_ranks_at_one_pace_name_no_slowest_and_a_later_epoch_is_further_along():
    board = ProgressBoard()
    for rank in range(4):
        board.update(rank, drawn("epoch 1" if rank != 1 else "epoch 0", 5 if rank != 1 else 48))
    assert board.lines() == ["epoch 1 5/50 [#---------] | ranks 0-3, slowest rank 1 at epoch 0 48/50"]
    board.update(1, drawn("epoch 1", 5))
    assert board.lines() == ["epoch 1 5/50 [#---------] | ranks 0-3"]


@given(st.lists(st.tuples(st.integers(0, 511), st.sampled_from(["train", "eval", "rank 7", "rank 9"]),
                          st.integers(0, 50)), max_size=300))
def test_any_number_of_ranks_gives_one_line_per_kind_of_bar_at_most(updates):
    board = ProgressBoard(max_groups=8)
    for rank, desc, n in updates:
        board.update(rank, drawn(desc, n))
    kinds = {"train", "eval", "rank"} & {desc.split()[0] for _, desc, _ in updates}
    assert len(board.lines()) == len(kinds)


def test_more_kinds_than_shown_are_counted():
    board = ProgressBoard(max_groups=2)
    for rank, desc in enumerate(["a", "b", "c", "d"]):
        board.update(rank, drawn(desc, 1))
    assert board.lines()[2:] == ["[2 more kinds of progress bar; each rank's in its log]"]


def test_one_rank_is_named_as_one():
    assert group_line({3: drawn("eval", 50)}) == "eval 50/50 [##########] | rank 3"
