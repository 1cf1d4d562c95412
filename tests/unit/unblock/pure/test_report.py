"""unblock/pure/report: what ``%mpirun --unblock`` says."""
from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.ranges import parse_ranks
from mlp_magic.unblock.pure import report

MADE = {"backend": "cpu:gloo,cuda:gloo", "world_size": 4, "stale": [["1", [0, 1]]]}


def test_every_rank_made_again_with_a_stale_subgroup():
    assert report.regrouped({r: MADE for r in range(4)}) == [
        "the default process group was made again (gloo, 4 ranks) on ranks 0-3: the next cell's "
        "collectives on it work; what kept the old one (DDP, FSDP, a DeviceMesh, a saved "
        "dist.group.WORLD) must be made again",
        "groups made with new_group are stale, make them again: group '1' (ranks 0-1)",
    ]


def test_failures_are_grouped_by_their_text():
    answers = {0: MADE, 1: {"error": "no store"}, 2: "RuntimeError: boom", 3: {"error": "no store"}}
    lines = report.regrouped(answers)
    assert lines[-2:] == ["ranks 2: the default process group was not made again: RuntimeError: boom",
                          "ranks 1,3: the default process group was not made again: no store"]


def test_no_default_group_anywhere():
    assert report.regrouped({0: None, 1: None}) == [
        "no default process group to make again (torch.distributed not initialised)"]


@given(st.dictionaries(st.integers(0, 63), st.one_of(st.none(), st.just(MADE), st.text(max_size=20)),
                       min_size=1))
def test_each_rank_with_an_answer_is_in_exactly_one_line(answers):
    named = []
    for line in report.regrouped(answers):
        found = re.search(r"(?:^|on )ranks ([0-9,-]+)", line)
        if found and not line.startswith("groups made"):
            named += parse_ranks(found.group(1))
    assert sorted(named) == sorted(rank for rank, answer in answers.items() if answer is not None)


def test_the_bound_grows_with_the_ranks_a_core_holds():
    assert report.bound_s(1.0) == report.bound_s(0.5) == 10.0
    assert report.bound_s(32.0) == 10.0 + 0.5 * 31
    assert "within 25.5 s" in report.still_blocked([0], {}, report.bound_s(32.0))


def test_backend_names():
    assert report.backend_name("cpu:gloo,cuda:nccl") == "gloo/nccl"
    assert report.backend_name("gloo") == "gloo"


def test_the_lines_name_what_was_tried_and_the_way_out():
    stuck = report.still_blocked([0, 2, 3], {"worker1": "ranks 2 have no unblock thread"})
    assert stuck.startswith("ranks 0,2-3 did not come free within 10 s (tried: closing their gloo "
                            "connections, aborting their NCCL communicators, revoking MPI's where ULFM "
                            "is on; worker1: ranks 2 have no unblock thread)")
    assert "`%mpirun --restart`" in stuck and "MPI call" in stuck and "ULFM, on by default" in stuck
    assert report.still_blocked([1], {}).startswith("rank 1 did not come free")
    shrunk = report.mpi_shrunk({r: {"size": 4, "library": "Open MPI v5.0.11"} for r in range(4)})
    assert shrunk.startswith("the World's MPI communicator was revoked to end the stuck MPI call "
                             "(Open MPI v5.0.11, ULFM); `comm` now names a new one of the same 4 ranks")
    failed = report.mpi_shrunk({0: {"size": 4, "library": "x"}, 1: "RemoteError: boom"})
    assert "rank 1 could not make a new one" in failed and "--restart" in failed
    assert report.nothing_hung(None) == ("nothing to unblock: no rank is still running a cell; "
                                         "nothing was changed")
    assert report.nothing_hung([3]).startswith("nothing to unblock: no rank of ranks 3 is still")
