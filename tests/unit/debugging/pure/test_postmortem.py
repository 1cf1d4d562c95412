"""Post-mortem's pure parts: frame numbering, the ranks chosen, the --where text."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.debugging.pure.postmortem import (LOCALS_PER_FRAME, REPR_LIMIT, FrameSummary, LocalSummary,
                                                 choose_ranks, format_local, format_where, short_text,
                                                 user_frames)
from mlp_magic.errors import MlpMagicError

SITE = "/venv/lib/python3.11/site-packages"
CELL = "/tmp/ipykernel_42/123.py"


def frame(file=CELL, line=1, function="f", user=True, source="", local_values=()):
    return FrameSummary(file, line, function, source, user, tuple(local_values))


def traceback_frames():
    """IPython's run_code > the cell > outer > torch > inner (user) > torch, outermost first."""
    return [
        frame(f"{SITE}/IPython/core/interactiveshell.py", 3577, "run_code", user=False),
        frame(CELL, 9, "<module>", source="outer(rank)\n",
              local_values=[LocalSummary("rank", "int", text="1")]),
        frame(CELL, 3, "outer", source="    return model(x)\n",
              local_values=[LocalSummary("x", "torch.Tensor", "(4, 5)", "torch.float32", "tensor([[0.]])")]),
        frame(f"{SITE}/torch/nn/modules/module.py", 1501, "_call_impl", user=False),
        frame("/home/ana/model.py", 12, "forward", source="        return inner(h)\n"),
        frame(f"{SITE}/torch/nn/functional.py", 1457, "relu", user=False),
    ]


def test_user_frames_are_numbered_from_the_innermost():
    assert user_frames(traceback_frames()) == [4, 2, 1]
    assert user_frames([frame(user=False)]) == []


def test_where_numbers_user_frames_and_folds_library_frames():
    text = format_where("ValueError: bad", traceback_frames())
    lines = text.splitlines()
    assert lines[0].startswith("Traceback (most recent call last")
    assert "run_code" not in text                       # IPython's machinery before the cell
    assert lines[1] == "  [frame 2] cell, line 9, in <module>"
    assert lines[2] == "        outer(rank)"
    assert lines[3] == "          rank: int = 1"
    assert "  [frame 1] cell, line 3, in outer" in lines
    assert "          x: torch.Tensor (4, 5) torch.float32 = tensor([[0.]])" in lines
    assert "    (library, 1 frame: torch/nn/modules/module.py:1501 _call_impl)" in lines
    assert "  [frame 0] /home/ana/model.py, line 12, in forward" in lines
    assert lines[-2] == "    (library, 1 frame: torch/nn/functional.py:1457 relu)"   # where it failed
    assert lines[-1] == "ValueError: bad"


def test_a_long_run_of_library_frames_shows_its_ends():
    inner = [frame(f"{SITE}/lib/m{i}.py", i, f"g{i}", user=False) for i in range(6)]
    text = format_where("E", [frame(), *inner])
    assert "(library, 6 frames: lib/m0.py:0 g0 > ... > lib/m5.py:5 g5)" in text


def test_where_without_user_frames():
    assert format_where("SyntaxError: x", [frame(user=False)]) == \
        "no frame of user code in the traceback\nSyntaxError: x\n"


def test_locals_beyond_the_cap_are_counted():
    many = [LocalSummary(f"v{i}", "int", text=str(i)) for i in range(LOCALS_PER_FRAME + 5)]
    text = format_where("E", [frame(local_values=many)])
    assert f"v{LOCALS_PER_FRAME - 1}: int" in text and f"v{LOCALS_PER_FRAME}: int" not in text
    assert "... and 5 more" in text


def test_format_local():
    assert format_local(LocalSummary("n", "int", text="3")) == "n: int = 3"
    assert format_local(LocalSummary("f", "function", text="<function f at 0x7f3a2b>")) == \
        "f: function = <function f>"                      # addresses differ from rank to rank
    text = "'at 0x10 for <you>'"
    assert format_local(LocalSummary("s", "str", text=text)) == f"s: str = {text}"
    text = "tensor([[1., 1.],\n  [1., 1.]])" * 20
    big = LocalSummary("t", "torch.Tensor", "(1024, 1024)", "torch.float16", text)
    line = format_local(big)
    assert line.startswith("t: torch.Tensor (1024, 1024) torch.float16 = tensor([[1., 1.], [1., 1.]])")
    assert "\n" not in line and line.endswith("...")


@given(st.text(max_size=400), st.integers(3, 200))
def test_short_text_is_one_bounded_line(text, limit):
    short = short_text(text, limit)
    assert "\n" not in short and len(short) <= limit
    flat = " ".join(text.split())
    assert short == flat or (short.endswith("...") and flat.startswith(short[:-3]))


def test_short_text_default_limit():
    assert len(short_text("x" * 1000)) == REPR_LIMIT


# ---------------------------------------------------------------- choosing ranks

def test_the_failed_ranks_by_default():
    assert choose_ranks("--where", None, {0: None, 1: 3, 2: None, 3: 2}) == [1, 3]
    assert choose_ranks("--pm", None, {0: None, 1: 3, 3: 2}, frame=1) == [1, 3]


def test_requested_ranks():
    assert choose_ranks("--pm", [3, 1, 3], {0: None, 1: 3, 3: 2}, frame=0) == [1, 3]
    assert choose_ranks("--pm", [3], {0: None, 1: 1, 3: 2}, frame=1) == [3]  # rank 1's frames do not matter


@pytest.mark.parametrize("requested, counts, frame, message", [
    (None, {0: None, 1: None}, 0, "--pm: no rank has a failure to inspect"),
    ([0], {0: None, 1: 2}, 0, "--pm: rank 0 has no failure to inspect (with one: rank 1)"),
    ([0, 1, 2], {0: None, 1: 2, 2: None, 3: 1}, 0,
     "--pm: ranks 0,2 have no failure to inspect (with one: ranks 1,3)"),
    (None, {0: 2, 1: 3}, 2,
     "--pm: --frame 2 is out of range: rank 0 has 2 frames of user code (--frame 0-1)"),
    (None, {0: 2, 1: 1, 2: 1, 3: 0}, 1,
     "--frame 1 is out of range: rank 3 has no frame of user code; ranks 1-2 have 1 frame of user code "
     "(--frame 0-0)"),
])
def test_bad_choices_are_one_line(requested, counts, frame, message):
    with pytest.raises(MlpMagicError) as caught:
        choose_ranks("--pm", requested, counts, frame)
    assert message in str(caught.value) and "\n" not in str(caught.value)


COUNTS = st.dictionaries(st.integers(0, 63), st.none() | st.integers(0, 5), min_size=1, max_size=16)


@given(counts=COUNTS, requested=st.none() | st.lists(st.integers(0, 63), max_size=6),
       frame=st.none() | st.integers(0, 6))
def test_chosen_ranks_have_a_failure_and_the_frame(counts, requested, frame):
    try:
        chosen = choose_ranks("--x", requested, counts, frame)
    except MlpMagicError as err:
        assert str(err).startswith("--x: ") and "\n" not in str(err)
        return
    assert chosen == sorted(set(chosen)) and chosen
    assert all(counts.get(rank) is not None for rank in chosen)
    assert frame is None or all(frame < counts[rank] for rank in chosen)
    if not requested:
        assert chosen == sorted(r for r, c in counts.items() if c is not None)
    else:
        assert chosen == sorted(set(requested))
