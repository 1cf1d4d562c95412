"""The picture: a flame graph of every rank's samples merged, the ranks named on each frame and the
frames only some ranks reached marked; a timeline of arrivals with each rank's wait."""
import re
from collections import Counter

from hypothesis import given, strategies as st

from mlp_magic.profile.pure.arrivals import matched
from mlp_magic.profile.pure.picture import flame_html, report_html, timeline_svg
from mlp_magic.profile.pure.report import found
from mlp_magic.stacks.pure.frames import CELL, Frame
from mlp_magic.stacks.pure.tree import merge_counted

from tests.unit.profile.pure.test_arrivals import entered
from tests.unit.profile.pure.test_report import raw

MODULE, STEP, SLOW = Frame(CELL, 12, "<module>"), Frame(CELL, 7, "step"), Frame(CELL, 4, "slow_step")


def test_frames_all_ranks_reached_are_one_and_the_odd_ranks_frames_are_marked():
    stacks = {r: Counter({(MODULE, STEP): 90}) for r in (0, 1, 3)} | {2: Counter({(MODULE, SLOW): 90})}
    page = flame_html(stacks)
    labels = re.findall(r"<div class='mlp-fl( mlp-part)?' title='[^']*'>([^<]*)</div>", page)
    assert labels == [("", "cell:12 &lt;module&gt; · all ranks · 100 %"),
                      (" mlp-part", "cell:7 step · ranks 0-1,3 · 75 %"),
                      (" mlp-part", "cell:4 slow_step · rank 2 · 25 %")], labels
    assert flame_html({}) == ""


@given(st.dictionaries(st.integers(0, 7), st.dictionaries(
    st.lists(st.sampled_from([MODULE, STEP, SLOW]), min_size=1, max_size=4).map(tuple), st.integers(1, 50),
    min_size=1, max_size=4), min_size=1, max_size=8))
def test_a_frame_holds_the_samples_of_every_stack_through_it(stacks):
    root = merge_counted({rank: Counter(counted) for rank, counted in stacks.items()})
    assert root.weight() == sum(sum(c.values()) for c in stacks.values())

    def check(node):
        assert node.weight() >= sum(child.weight() for child in node.children.values())
        assert set(node.counts) == node.members
        for child in node.children.values():
            assert child.members <= node.members
            check(child)
    check(root)


def test_the_timeline_has_a_row_per_rank_the_stragglers_marked_and_each_wait_told():
    times = {r: [float(i) + (0.2 if r == 2 else 0.0) for i in range(3)] for r in range(4)}
    svg = timeline_svg(matched(entered(times)), 2)
    assert re.findall(r"<text x='0' y='\d+' fill='([^']+)'>rank (\d)</text>", svg) == [
        ("#34495e", "0"), ("#34495e", "1"), ("#c0392b", "2"), ("#34495e", "3")]
    assert svg.count("rank 0: all_reduce #") == 3 and "rank 0: all_reduce #1, waited 200 ms" in svg
    assert "rank 2: all_reduce #3, waited 0 ms" in svg
    assert timeline_svg([], None) == ""


def test_the_whole_picture_holds_the_text_the_flame_graph_and_the_timeline():
    raws = {r: raw(10, 90) for r in (0, 1, 3)} | {2: raw(93, 7, "slow_step", 4)}
    times = {r: [float(i) + (0.2 if r == 2 else 0.0) for i in range(4)] for r in range(4)}
    page = report_html(found(raws, entered(times), {}, 100, 1.0))
    assert page.startswith("<pre>profile of ranks 0-3 at 100 Hz over 1.0 s:\n") and "mlp-flame" in page
    assert "<svg" in page and "rank 2 entered last at 4 of 4 collectives" in page
