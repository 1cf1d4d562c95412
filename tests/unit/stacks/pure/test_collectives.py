"""The hang report's collectives (stacks/pure/collectives): a rank's flight-recorder dump ->
what it reports -> the lines that name who is behind and who called something else."""
from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from mlp_magic.stacks.pure.collectives import TITLE, group_lines, mismatches, rank_state, section, signature
from mlp_magic.stacks.pure.recorded import KEEP, op_name, parse_answer, slim
from mlp_magic.stacks.pure.frames import Frame, user_line

from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import dumps, hostile


def entry(seq: int, pg_id: int = 0, name: str = "0", desc: str = "default_pg", op: str = "all_reduce",
          sizes=((4,),), dtype: str = "Float", p2p: bool = False) -> dict:
    """One entry as torch 2.14's _dump_fr_trace_json writes it (the fields we read, and others)."""
    return {"collective_seq_id": seq, "input_dtypes": [dtype] * len(sizes),
            "input_sizes": [list(s) for s in sizes], "is_p2p": p2p, "op_id": seq, "pg_id": pg_id,
            "process_group": [name, desc],
            "profiling_name": f"gloo:{op}", "record_id": seq, "retired": True, "state": "scheduled"}


def status(enqueued: int, completed: int) -> dict:
    return {"last_completed_collective": str(completed), "last_enqueued_collective": str(enqueued),
            "last_started_collective": "-1"}


# A real dump's shape: rank 0 of 2, three all_reduces on the default group, a broadcast on a
# subgroup, then a fourth all_reduce it waits in (float64).
DUMP = {"pg_config": {"": {"desc": "", "name": "", "ranks": "[0, 1]"}},
        "pg_status": {"0": status(4, 3), "1": status(1, 1)},
        "entries": [entry(1), entry(2), entry(3), entry(1, 1, "1", "undefined", "broadcast"),
                    entry(4, dtype="Double")], "version": "2.10"}


def test_a_dump_becomes_each_groups_numbers_and_last_entries():
    groups = slim(DUMP)["groups"]
    assert [(g["name"], g["desc"], g["enqueued"], g["completed"]) for g in groups] == [
        ("0", "default_pg", 4, 3), ("1", "undefined", 1, 1)]
    assert groups[0]["last"][-1] == {"seq": 4, "op": "all_reduce", "sizes": [[4]], "dtypes": ["Double"]}


def test_a_group_made_again_is_its_newest_namesake_and_a_fresh_one_has_no_past():
    """After destroy and init, torch names the new default group "0" again under another pg_id;
    the dump keeps the old one. The live names pick the newest; a live group that called nothing
    yet has no past (not its namesake's)."""
    dump = {"pg_status": {"0": status(7, 6), "2": status(2, 2)},
            "entries": [entry(6), entry(7), entry(1, pg_id=2), entry(2, pg_id=2)]}
    made_again = slim(dump, {"0": {"desc": "default_pg", "seq": 2}})["groups"]
    assert [(g["name"], g["enqueued"]) for g in made_again] == [("0", 2)]
    fresh = slim(dump, {"0": {"desc": "default_pg", "seq": 0}})["groups"]
    assert [(g["enqueued"], g["completed"], g["last"]) for g in fresh] == [(0, 0, [])]
    assert [g["name"] for g in slim(dump)["groups"]] == ["0"]   # without live names: the newest too


def test_point_to_point_entries_and_old_entries_are_left_out():
    dump = {"pg_status": {"0": status(30, 30)},
            "entries": [entry(n) for n in range(1, 31)] + [entry(0, op="send", p2p=True)]}
    last = slim(dump)["groups"][0]["last"]
    assert [e["seq"] for e in last] == list(range(31 - KEEP, 31))


def test_answers_read_back_or_are_none():
    groups = slim(DUMP)["groups"]
    assert parse_answer(json.dumps({"groups": groups})) == groups
    assert parse_answer('{"groups": []}') == []
    assert parse_answer('{"groups": [], "error": "RuntimeError: boom"}') == "RuntimeError: boom"
    for bad in ("", "{", "[]", '{"groups": 3}', '{"groups": [{"no": "name"}]}', "null"):
        assert parse_answer(bad) is None, bad


def test_signature_reads_like_torch():
    assert signature({"op": "all_reduce", "sizes": [[4]], "dtypes": ["Float"]}) == "all_reduce [4] float32"
    gathered = {"op": "all_gather", "sizes": [[2, 3], [2, 3]], "dtypes": ["BFloat16", "BFloat16"]}
    assert signature(gathered) == "all_gather [2, 3] [2, 3] bfloat16"
    assert signature({"op": "x", "sizes": [[1]] * 5, "dtypes": ["Weird"]}) == "x [1] [1] [1] (+2) weird"
    assert op_name("nccl:reduce_scatter") == "reduce_scatter" and op_name(None) == "?"


def group(enqueued: int, completed: int, *entries, name: str = "0") -> dict:
    return {"name": name, "desc": "default_pg" if name == "0" else "undefined",
            "enqueued": enqueued, "completed": completed,
            "last": [{"seq": s, "op": op, "sizes": [[n]], "dtypes": ["Float"]} for s, op, n in entries]}


def test_each_rank_says_where_it_is_and_how_far_behind():
    waiting = group(7, 6, (7, "all_reduce", 4))
    assert rank_state(waiting, 7, "cell:4") == "in all_reduce #7 [4] float32 (cell:4)"
    assert rank_state(group(6, 6), 7, None) == "completed #6, in no collective, behind by 1"
    assert rank_state(group(0, 0), 2, None) == "no collective yet, behind by 2"
    assert rank_state(group(9, 6), 9, None) == "in collective #9, 3 not completed since #6"


def test_the_issues_example_one_line_the_largest_group_first():
    by_rank = {r: group(7, 6, (7, "all_reduce", 4)) for r in (0, 2, 3)}
    by_rank[1] = group(6, 6, (6, "all_reduce", 4))
    lines = group_lines("0", by_rank, {0: "cell:4", 2: "cell:4", 3: "cell:4"})
    assert lines == ["default group: ranks 0,2-3 (3): in all_reduce #7 [4] float32 (cell:4); "
                     "rank 1: completed #6, in no collective, behind by 1"]


def test_a_mismatch_names_the_number_and_each_side():
    by_rank = {r: group(4, 4, (4, "all_reduce", 2)) for r in range(3)}
    by_rank[3] = group(4, 3, (4, "all_reduce", 3))
    assert mismatches(by_rank) == [
        "mismatch at #4: ranks 0-2 (3) all_reduce [2] float32; rank 3 all_reduce [3] float32"]
    other_op = {0: group(5, 4, (5, "broadcast", 2)), 1: group(5, 4, (5, "all_reduce", 2))}
    assert mismatches(other_op) == [
        "mismatch at #5: rank 0 broadcast [2] float32; rank 1 all_reduce [2] float32"]


def test_ops_whose_ranks_pass_different_sizes_are_compared_by_op_only():
    root = {"name": "0", "enqueued": 3, "completed": 3,
            "last": [{"seq": 3, "op": "scatter", "sizes": [[8]], "dtypes": ["Float"]}]}
    peer = {"name": "0", "enqueued": 3, "completed": 3,
            "last": [{"seq": 3, "op": "scatter", "sizes": [[2]], "dtypes": ["Float"]}]}
    assert mismatches({0: root, 1: peer}) == []
    other = dict(peer, last=[{"seq": 3, "op": "all_reduce", "sizes": [[2]], "dtypes": ["Float"]}])
    assert mismatches({0: root, 1: other}) == [
        "mismatch at #3: rank 0 scatter; rank 1 all_reduce [2] float32"]


def test_no_process_group_anywhere_means_no_section():
    assert section({0: [], 1: [], 2: None}, {}) == []
    assert section({}, {}) == []


def test_the_section_names_subgroups_and_the_ranks_without_an_answer():
    answers = {0: [group(3, 3), group(1, 1, name="5")], 1: [group(3, 3)], 2: [], 3: None,
               4: "RuntimeError: x"}
    lines = section(answers, {})
    assert lines[0] == TITLE
    assert "default group: ranks 0-1 (2): completed #3, in no collective" in lines
    assert "group '5': rank 0: completed #1, in no collective" in lines
    assert "rank 4: the recorder could not be read (RuntimeError: x)" in lines
    assert "rank 2: no process group (torch.distributed not initialised there)" in lines
    assert lines[-1] == "rank 3: no answer"


def test_many_states_go_one_per_line():
    by_rank = {r: group(r + 1, r + 1) for r in range(6)}
    lines = group_lines("0", by_rank, {})
    assert lines[0] == "default group:" and len(lines) == 7
    assert lines[-1] == "  rank 5: completed #6, in no collective"


def test_the_user_line_is_the_innermost_frame_of_user_code():
    frames = (Frame("<cell>", 4, "<module>"), Frame("/work/train.py", 88, "step"),
              Frame("/venv/lib/python3.11/site-packages/torch/distributed/c10d.py", 10, "all_reduce"))
    assert user_line(frames) == "train.py:88"
    assert user_line(frames[2:]) is None


# ------------------------------------------------------------------ properties (hypothesis)

RANK_GROUP = st.builds(lambda e, c: group(max(e, c), c), st.integers(0, 50), st.integers(0, 50))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 511), RANK_GROUP, min_size=1, max_size=64))
def test_every_rank_is_named_once_and_only_the_newest_are_not_behind(by_rank):
    lines = group_lines("0", by_rank, {})
    text = "\n".join(lines)
    newest = max(g["enqueued"] for g in by_rank.values())
    for rank, g in by_rank.items():
        assert ("behind by" in rank_state(g, newest, None)) == (g["enqueued"] < newest)
    parts = [p.strip() for p in text.replace("default group:", "").replace("\n", ";").split(";") if p.strip()]
    counted = sum(int(p.split("(")[1].split(")")[0]) if p.startswith("ranks ") else 1 for p in parts)
    assert counted == len(by_rank)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(0, 3), st.sampled_from(["all_reduce", "broadcast"]),
                          st.sampled_from(["Float", "Half"]), st.booleans()), max_size=60),
       st.dictionaries(st.sampled_from(["0", "1", "2", "3"]),
                       st.tuples(st.integers(-1, 40), st.integers(-1, 40))))
def test_slim_takes_any_dump_and_keeps_it_small(raw_entries, statuses):
    dump = {"entries": [entry(seq, pg, str(pg), op=op, dtype=dtype, p2p=p2p)
                        for seq, pg, op, dtype, p2p in raw_entries],
            "pg_status": {k: status(*v) for k, v in statuses.items()}}
    answer = slim(dump)
    assert parse_answer(json.dumps(answer)) == answer["groups"]
    for g in answer["groups"]:
        assert len(g["last"]) <= KEEP and g["enqueued"] >= 0 and g["completed"] >= 0
        assert [e["seq"] for e in g["last"]] == sorted(e["seq"] for e in g["last"])


# ------------------------------------------------------------------ hostile JSON (hypothesis)

def shown(answers: dict) -> list:
    """The section's lines, each a line of text (what the hang report prints)."""
    lines = section(answers, {0: "cell:4"})
    assert all(isinstance(line, str) and "\n" not in line for line in lines)
    return lines


@FUZZ
@given(hostile(DUMP))
@example(dict(DUMP, pg_status={"0": dict(status(4, 3), last_completed_collective=float("inf"))}))
@example(dict(DUMP, entries=[dict(entry(1), process_group=5)]))   # TypeError: not subscriptable
@example(dict(DUMP, entries=[dict(entry(1), input_sizes=[float("nan")])]))   # a size list(nan)
def test_slim_reads_any_dump_into_an_answer_that_reads_back(dump):
    """A recorder's dump with values torch never writes: the rank still answers the groups it
    can read (slim skips what it cannot), and its answer reads back whole."""
    answer = slim(json.loads(dumps(dump)))
    assert parse_answer(json.dumps(answer, allow_nan=False)) == answer["groups"]
    shown({0: answer["groups"], 1: slim(DUMP)["groups"]})


@FUZZ
@given(hostile({"groups": slim(DUMP)["groups"]}))
@example({"groups": [dict(slim(DUMP)["groups"][0], enqueued=float("inf"))]})   # OverflowError
@example({"groups": [dict(slim(DUMP)["groups"][0], last=[None])]})            # AttributeError
@example({"groups": [dict(slim(DUMP)["groups"][0], last=[{"seq": []}])]})     # unhashable
def test_an_answer_with_hostile_values_reads_as_groups_an_error_or_no_answer(answer):
    parsed = parse_answer(dumps(answer))
    assert parsed is None or isinstance(parsed, (str, list))
    shown({0: parsed, 1: slim(DUMP)["groups"], 2: None})
