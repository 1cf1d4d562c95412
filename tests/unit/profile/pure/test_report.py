"""The report: ranks that spent the cell alike on one line, the straggler and where its time went."""
from hypothesis import given, strategies as st

from mlp_magic.profile.pure.report import default_rate, found, rate_note

from tests.unit.profile.pure.test_arrivals import entered
from tests.unit.profile.pure.test_samples import C10D, CELL_FILE, ENGINE


def raw(work: int, waiting: int, function: str = "step", line: int = 7) -> str:
    return (f"{ENGINE};<module> ({CELL_FILE}:12);{function} ({CELL_FILE}:{line}) {work}\n"
            f"{ENGINE};<module> ({CELL_FILE}:14);all_reduce ({C10D}:2950) {waiting}\n")


def test_the_odd_rank_stands_out_and_is_named_with_its_function():
    raws = {r: raw(10, 90) for r in (0, 1, 3)} | {2: raw(93, 7, "slow_step", 4)}
    times = {r: [float(i) + (0.2 if r == 2 else 0.0) for i in range(6)] for r in range(4)}
    report = found(raws, entered(times), {}, 100, 1.3)
    assert report.lines[0] == "profile of ranks 0-3 at 100 Hz over 1.3 s:"
    assert report.lines[1] == ("ranks 0-1,3 (3): in all_reduce 90 % · step (cell:7) 10 % · "
                               "waiting for later ranks 100 %")
    assert report.lines[2] == "rank 2: slow_step (cell:4) 93 %"   # under a tenth: in the samples' files only
    assert report.lines[3].startswith("rank 2 entered last at 6 of 6 collectives (all_reduce #1-6), "
                                      "200 ms late")
    assert report.lines[3].endswith("its time went to slow_step (cell:4), 93 %")
    assert report.straggler == 2


def test_ranks_without_samples_say_why_and_no_collective_is_said():
    report = found({0: raw(5, 0)}, {}, {1: "py-spy could not sample this rank: Permission denied"}, 100, 0.5)
    assert "rank 1: py-spy could not sample this rank: Permission denied" in report.lines
    assert report.lines[-1].startswith("no torch.distributed collective was recorded in the cell")


def test_ranks_whose_minor_places_or_order_differ_are_one_line():
    """A sample or two elsewhere, or two places of about equal share swapped, split no group."""
    raws = {0: raw(48, 52), 1: raw(52, 48), 2: raw(50, 50) + f"{ENGINE};<module> ({CELL_FILE}:11) 2\n"}
    report = found(raws, {}, {}, 100, 1.0)
    assert report.lines[1] == "ranks 0-2 (3): in all_reduce 48-52 % · step (cell:7) 48-52 %", report.lines


def test_the_default_rate_is_100_hz_until_the_ranks_share_the_cores():
    assert default_rate(8 / 96) == 100 and default_rate(0) == 100   # a GPU node; an unknown host
    assert default_rate(2) == 9 and default_rate(64) == 1   # 4 and 128 ranks on 2 cores
    assert rate_note(100, 0.1) == ""
    assert rate_note(9, 2) == ("(at 9 Hz, not 100: 2 ranks a CPU on the busiest host, and the samplers take "
                               "at most 3% of its CPUs; --rate HZ sets it)")


@given(st.floats(0.001, 1000), st.floats(0.001, 1000))
def test_more_ranks_a_cpu_never_sample_faster(fewer, more):
    fewer, more = sorted((fewer, more))
    assert 1 <= default_rate(more) <= default_rate(fewer) <= 100
