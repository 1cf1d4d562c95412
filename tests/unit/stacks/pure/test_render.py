"""The merged tree as text and HTML: shared frames once, indentation only where ranks part,
odd groups named, user code marked, everything escaped."""
from __future__ import annotations

import re

from hypothesis import given

from mlp_magic.stacks.pure.render import (HEAD, ODD, SPLIT, is_user, merged_html, merged_text,
                                          render_tree_html, render_tree_text, tree_lines)
from mlp_magic.stacks.pure.frames import Frame, frame_text
from mlp_magic.stacks.pure.tree import classes, merge

from tests.unit.stacks.pure.test_tree import label, stacks, text

TRAIN = "/home/me/train.py"
TORCH = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def hung_job() -> dict:
    """15 ranks in all_reduce under step(), rank 7 in its data loader."""
    common = (Frame(TRAIN, 120, "<module>"),)
    reduce = common + (Frame(TRAIN, 88, "step"), Frame(TORCH, 2050, "all_reduce"))
    loader = common + (Frame("/home/me/dataset.py", 41, "__getitem__"),
                       Frame("/usr/lib/python3.11/time.py", 0, "sleep"))
    return {r: loader if r == 7 else reduce for r in range(16)}


def test_the_text_tree_of_a_hung_job():
    assert merged_text(merge(hung_job()), label) == (
        "summary: ranks 0-6,8-15: train.py:88 step > torch/distributed/distributed_c10d.py:2050 all_reduce; "
        "rank 7: dataset.py:41 __getitem__ > sleep [time.py]\n"
        "ranks 0-15\n"
        "  > train.py:120 <module>\n"
        "  * ranks part here: 2 groups\n"
        "  |-- ranks 0-6,8-15\n"
        "  |   --> train.py:88 step\n"
        "  |       torch/distributed/distributed_c10d.py:2050 all_reduce\n"
        "  `-- rank 7  [odd]\n"
        "      --> dataset.py:41 __getitem__\n"
        "          sleep [time.py]\n")


def test_the_html_tree_colours_the_odd_group_and_escapes():
    markup = merged_html(merge(hung_job()), label, title="job <1>")
    assert "job &lt;1&gt;" in markup and "&lt;module&gt;" in markup and "<module>" not in markup
    assert re.search(r'<span style="[^"]*color:#c62828">  `-- rank 7  \[odd\]</span>', markup)
    assert markup.count("<pre") == 1


@given(stacks)
def test_each_distinct_stack_is_one_branch_label(given_stacks):
    root = merge(given_stacks)
    lines = tree_lines(root, label, text, lambda frame: False)
    heads = [line for kind, line in lines if kind in (HEAD, ODD)]
    leaves = classes(root)
    splits = sum(1 for kind, _ in lines if kind == SPLIT)
    # the whole tree's label, then one label per branch at each split: at least one per leaf
    assert heads[0] == label(given_stacks)
    assert len(heads) >= len(leaves) + (1 if splits else 0)
    for members, _ in leaves:
        assert any(line.strip(" |`-").replace("  [odd]", "") == label(members) for line in heads)


@given(stacks)
def test_text_and_html_show_the_same_lines(given_stacks):
    root = merge(given_stacks)
    plain = render_tree_text(root, label, text, lambda frame: False)
    markup = render_tree_html(root, label, text, lambda frame: False)
    unmarked = re.sub(r"<[^>]+>", "", markup.split("<pre", 1)[1].split(">", 1)[1].rsplit("</pre>", 1)[0])
    assert unmarked.replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&") + "\n" == plain


def test_pseudo_frames_and_libraries_are_not_user_code():
    assert is_user(Frame(TRAIN, 1, "f")) and is_user(Frame("<cell>", 3, "<module>"))
    assert not is_user(Frame(TORCH, 1, "f")) and not is_user(Frame("", 0, "thread worker"))
    assert not is_user(Frame("/usr/lib/x86_64-linux-gnu/libc.so.6", 0, "poll"))
    assert frame_text(Frame("/usr/lib/x86_64-linux-gnu/libc.so.6", 0, "poll")) == "poll [libc.so.6]"
