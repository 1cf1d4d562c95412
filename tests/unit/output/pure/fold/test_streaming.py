"""Live lines folded by template: a bounded stream and view, whatever the number of ranks."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.output.pure.fold.streaming import StreamingFold


def test_512_ranks_printing_a_loop_stream_a_bounded_number_of_lines():
    live = StreamingFold(interval=2.0)
    printed = []
    now = 0.0
    for step in range(20):
        for rank in range(512):
            printed += live.add(rank, "stdout", f"step {step} loss {0.5 + rank / 1e4:.4f} rank {rank}", now)
        now += 0.5
        printed += live.due(now)
    assert printed[0] == "[0] step 0 loss 0.5000 rank 0"   # the first line of a template, as it came
    assert len(printed) <= 1 + 20 * 0.5 / 2.0 + 1           # then at most one repeat per 2 s
    assert printed[-1] == "[0-511 ×10,240] step 19 loss 0.5511 rank 511"
    assert live.view(40) == ["[0-511 ×10,240] step 19 loss 0.5511 rank 511"]


def test_streams_and_templates_are_separate_entries_in_order_of_first_appearance():
    live = StreamingFold()
    assert live.add(1, "stderr", "warning 3", 0.0) == ["[1:err] warning 3"]
    assert live.add(0, "stdout", "hello 1", 0.0) == ["[0] hello 1"]
    assert live.add(2, "stdout", "warning 3", 0.0) == ["[2] warning 3"]   # same text, other stream
    assert live.add(3, "stderr", "warning 9", 0.0) == []
    assert live.view(10) == ["[1,3:err ×2] warning 9", "[0] hello 1", "[2] warning 3"]
    assert live.due(0.5) == []        # within the interval
    assert live.due(5.0) == ["[1,3:err ×2] warning 9"]
    assert live.due(9.0) == []        # nothing new since


def test_the_view_keeps_the_most_recently_active_templates():
    live = StreamingFold()
    live.add(0, "stdout", "loop 1", 0.0)
    for i in range(50):
        live.add(0, "stdout", f"one-off line {'x' * i}", 0.0)
    live.add(1, "stdout", "loop 2", 0.0)
    view = live.view(3)
    assert view[0] == "[0-1 ×2] loop 2" and len(view) == 3


def test_templates_beyond_the_cap_are_counted_not_kept():
    live = StreamingFold(max_templates=5)
    for i in range(20):
        live.add(0, "stdout", "word" + "x" * i, 0.0)
    assert len(live.entries) == 5 and live.others == 15
    assert live.view(10)[-1] == "[15 more lines of other kinds; the summary follows the cell]"


@given(st.lists(st.tuples(st.integers(0, 63), st.sampled_from(["stdout", "stderr"]),
                          st.sampled_from(["a {}", "b {} {}", "c", "{} d"]), st.integers(0, 10 ** 6)),
                max_size=200))
@settings(max_examples=200)
def test_every_line_is_counted_once(lines):
    live = StreamingFold(max_templates=3)
    for rank, stream, template, number in lines:
        live.add(rank, stream, template.format(number, number), 0.0)
    assert sum(e.count for e in live.entries.values()) + live.others == len(lines) == live.lines_seen
