"""Every rank's samples in one speedscope file: a profile a rank, each stack's frames indexes into
the shared frames, its weight the seconds its samples stand for."""
import json
from collections import Counter

from hypothesis import given, strategies as st

from mlp_magic.profile.pure.speedscope import speedscope_json
from mlp_magic.stacks.pure.frames import CELL, Frame

MODULE, STEP = Frame(CELL, 12, "<module>"), Frame(CELL, 7, "step")
NATIVE = Frame("libmpi.so", 0, "MPI_Allreduce")


def _back(text: str) -> dict:
    """{rank: {frames: samples}} read back from the file, at 10 Hz."""
    loaded = json.loads(text)
    frames = [Frame(f["file"], f.get("line", 0), f["name"]) for f in loaded["shared"]["frames"]]
    return {int(p["name"].split()[1]): Counter({tuple(frames[i] for i in stack): round(weight * 10)
                                                for stack, weight in zip(p["samples"], p["weights"])})
            for p in loaded["profiles"]}


def test_two_ranks_share_their_frames_and_a_native_frame_has_no_line():
    text = speedscope_json({1: Counter({(MODULE, STEP): 3}), 0: Counter({(MODULE, NATIVE): 5})}, 10, "cell 3")
    loaded = json.loads(text)
    assert loaded["shared"]["frames"] == [{"name": "<module>", "file": CELL, "line": 12},
                                          {"name": "MPI_Allreduce", "file": "libmpi.so"},
                                          {"name": "step", "file": CELL, "line": 7}]
    first, second = loaded["profiles"]
    assert first == {"type": "sampled", "name": "rank 0", "unit": "seconds", "startValue": 0,
                     "endValue": 0.5, "samples": [[0, 1]], "weights": [0.5]}
    assert second["name"] == "rank 1" and second["samples"] == [[0, 2]]
    assert loaded["name"] == "cell 3" and loaded["activeProfileIndex"] == 0


@given(st.dictionaries(st.integers(0, 63), st.dictionaries(
    st.lists(st.sampled_from([MODULE, STEP, NATIVE]), min_size=1, max_size=5).map(tuple),
    st.integers(1, 500), max_size=5), max_size=6))
def test_the_file_holds_every_ranks_stacks_as_they_were(stacks):
    assert _back(speedscope_json(stacks, 10, "x")) == {rank: Counter(s) for rank, s in stacks.items()}
