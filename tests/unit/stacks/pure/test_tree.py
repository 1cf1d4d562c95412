"""The STAT-style prefix tree: every stack is kept, members part where their frames do, the
biggest branch is the majority and the smaller ones are named as odd."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.ranges import fold_ranks
from mlp_magic.stacks.pure.tree import chain, classes, deepest_user_nodes, merge, odd, summary


def label(members) -> str:
    members = sorted(members)
    return f"rank {members[0]}" if len(members) == 1 else f"ranks {fold_ranks(members)}"


def text(frame) -> str:
    return str(frame)


# Small alphabets so that stacks share prefixes often.
frames = st.sampled_from(["main", "step", "barrier", "allreduce", "sleep", "getitem", "wait"])
stacks = st.dictionaries(st.integers(0, 40), st.lists(frames, max_size=6), min_size=1, max_size=24)


def path_of(root, member) -> list:
    """Follow ``member`` down the tree: the frames it passes, until its stack ends."""
    node, path = root, []
    while member not in node.ends:
        [node] = [child for child in node.children.values() if member in child.members]
        path.append(node.frame)
    return path


@given(stacks)
def test_every_stack_is_kept_whole(given_stacks):
    root = merge(given_stacks)
    assert root.members == set(given_stacks)
    for member, stack in given_stacks.items():
        assert path_of(root, member) == stack


@given(stacks)
def test_a_nodes_members_are_its_childrens_and_those_ending_there(given_stacks):
    pending = [merge(given_stacks)]
    while pending:
        node = pending.pop()
        parts = node.branches()
        covered = [m for members, _ in parts for m in members]
        assert sorted(covered) == sorted(node.members)            # a partition: no member twice
        assert [len(p[0]) for p in parts] == sorted((len(p[0]) for p in parts), reverse=True)
        assert node.diverges() == (len(parts) > 1)
        assert all(odd(parts, i) == (2 * len(parts[i][0]) <= len(parts[0][0])) for i in range(len(parts)))
        assert not odd(parts, 0)
        pending.extend(node.children.values())


@given(stacks)
def test_classes_are_the_distinct_stacks(given_stacks):
    found = classes(merge(given_stacks))
    expected: dict = {}
    for member, stack in given_stacks.items():
        expected.setdefault(tuple(stack), set()).add(member)
    assert {frames: set(members) for members, frames in found} == expected
    assert [len(m) for m, _ in found] == sorted((len(m) for m, _ in found), reverse=True)


@given(stacks)
def test_the_summary_names_every_member_once(given_stacks):
    line = summary(merge(given_stacks), label, text)
    named = []
    for piece in line.split("; "):
        who = piece.split(":", 1)[0]
        if " more groups (" in who:
            who = who.split("(", 1)[1].rstrip(")")
        for part in who.split(" ", 1)[1].split(","):
            first, _, last = part.partition("-")
            named.extend(range(int(first), int(last or first) + 1))
    assert sorted(named) == sorted(given_stacks)


def test_the_odd_rank_is_named_with_where_it_went():
    common = ["train.py:120 <module>", "train.py:88 step"]
    given_stacks = {r: common + ["ddp.py:40 forward", "all_reduce"] for r in range(16) if r != 7}
    given_stacks[7] = common[:1] + ["dataset.py:41 __getitem__"]
    root = merge(given_stacks)
    assert summary(root, label, text) == ("ranks 0-6,8-15: train.py:88 step > ... > all_reduce; "
                                          "rank 7: dataset.py:41 __getitem__")
    nodes, last = chain(root)
    assert [n.frame for n in nodes] == ["train.py:120 <module>"]   # shared by all, then they part
    parts = last.branches()
    assert [sorted(p[0]) for p in parts] == [[r for r in range(16) if r != 7], [7]]
    assert [odd(parts, i) for i in range(2)] == [False, True]


def test_two_camps_are_not_odd_a_lone_rank_is():
    camps = {r: ["a", "b"] if r < 76 else ["a", "c"] for r in range(128)}
    parts = merge(camps).branches()
    parts = parts[0][1].branches()
    assert [odd(parts, i) for i in range(2)] == [False, False]
    parts = merge({0: ["a"], 1: ["a"], 2: ["b"]}).branches()
    assert [odd(parts, i) for i in range(2)] == [False, True]


def test_the_summary_counts_what_it_does_not_name():
    line = summary(merge({r: [f"f{r}"] for r in range(12)}), label, text)
    assert line.endswith("; 4 more groups (ranks 8-11): see the tree") and line.count(";") == 8


def test_one_place_for_everyone_is_one_line_from_first_to_innermost():
    root = merge({r: ["a", "b", "c", "d"] for r in range(4)})
    assert summary(root, label, text) == "ranks 0-3: a > ... > d"
    nodes, last = chain(root)
    assert [n.frame for n in nodes] == ["a", "b", "c", "d"] and not last.diverges()


def test_a_stack_that_ends_where_others_go_on_is_its_own_branch():
    root = merge({0: ["a", "b"], 1: ["a", "b", "c"], 2: ["a", "b", "c"]})
    _, last = chain(root)
    parts = last.branches()
    assert [(sorted(m), child is None) for m, child in parts] == [([1, 2], False), ([0], True)]
    assert summary(root, label, text) == "ranks 1-2: c; rank 0: b"


def test_empty_stacks_end_at_the_root():
    root = merge({0: [], 1: ["a"]})
    assert root.ends == {0} and summary(root, label, text) == "rank 0: (no Python frame); rank 1: a"


def test_the_innermost_user_frame_of_each_stack_is_found():
    root = merge({0: ["user1", "lib", "user2", "lib"], 1: ["user1", "lib"]})
    marked = deepest_user_nodes(root, lambda frame: frame.startswith("user"))
    frames = []
    pending = [root]
    while pending:
        node = pending.pop()
        if id(node) in marked:
            frames.append(node.frame)
        pending.extend(node.children.values())
    assert sorted(frames) == ["user1", "user2"]


def test_deep_stacks_need_no_recursion():
    deep = [f"f{i}" for i in range(5000)]
    root = merge({0: deep, 1: deep[:4000] + ["other"]})
    assert summary(root, label, text) == "rank 0: f4000 > ... > f4999; rank 1: other"
