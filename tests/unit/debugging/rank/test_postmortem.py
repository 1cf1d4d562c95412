"""The engine's side of post-mortem, on real exceptions and IPython's own cell results: which
failure is kept, the frames it offers, code run in them, the locals --where summarises."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult

from mlp_magic.debugging.rank import postmortem
from mlp_magic.engine.bootstrap import INSPECT_TAG, keep_failure_of
from mlp_magic.debugging.rank.script import script_problem
from mlp_magic.errors import MlpMagicError

SETTING = "a global of this module"


def inner(values):
    total = sum(values)
    grid = np.zeros((2, 3), dtype=np.float32)
    raise ValueError(f"bad total {total} {grid.shape}")


def outer(x):
    doubled = [x * 2] * 3
    return inner(doubled)


def _info(raw_cell: str) -> ExecutionInfo:
    """A cell's ExecutionInfo as the installed IPython makes it (cell_id came after 8.0)."""
    extra = {"cell_id": None} if "cell_id" in inspect.signature(ExecutionInfo).parameters else {}
    return ExecutionInfo(raw_cell, False, False, True, **extra)


def failed_cell(raw_cell: str = "outer(5)", error: BaseException | None = None) -> ExecutionResult:
    result = ExecutionResult(_info(raw_cell))
    if error is None:
        try:
            outer(5)
        except ValueError as caught:
            error = caught
    result.error_in_exec = error
    return result


def ok_cell(raw_cell: str = "pass") -> ExecutionResult:
    return ExecutionResult(_info(raw_cell))


@pytest.fixture(autouse=True)
def no_failure_kept():
    keep_failure_of(ok_cell())   # a cell that succeeds forgets it
    yield
    keep_failure_of(ok_cell())


def test_a_failure_is_kept_until_a_cell_succeeds():
    assert postmortem.failure_summary() is None
    keep_failure_of(failed_cell())
    summary = postmortem.failure_summary()
    assert summary["error"] == "ValueError: bad total 30 (2, 3)"
    assert summary["frames"] >= 3      # inner, outer, this file's caller
    keep_failure_of(ok_cell(INSPECT_TAG + "\nlooking()"))   # inspecting keeps it
    broken = ok_cell("x = (")
    broken.error_before_exec = SyntaxError("never ran")
    keep_failure_of(broken)                                           # nothing ran: kept
    assert postmortem.failure_summary() == summary
    keep_failure_of(ok_cell())
    assert postmortem.failure_summary() is None


def test_a_later_failure_replaces_the_earlier_one():
    keep_failure_of(failed_cell())
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as stop:
        keep_failure_of(failed_cell(error=stop))
    assert postmortem.failure_summary()["error"] == "KeyboardInterrupt (interrupted here)"


def test_run_in_frame_sees_each_frames_locals():
    keep_failure_of(failed_cell())
    assert postmortem.run_in_frame("total, grid.shape") == (30, (2, 3))
    assert postmortem.run_in_frame("x + len(doubled)", 1) == 8
    assert postmortem.run_in_frame("[x * i for i in range(3)]", 1) == [0, 5, 10]   # comprehensions too
    assert postmortem.run_in_frame("SETTING", 1) == SETTING                          # and the globals
    assert postmortem.run_in_frame("y = x + 1\ny * 2", 1) == 12
    assert postmortem.run_in_frame("print(x)", 1) is None
    assert "y" not in globals()


def test_run_in_frame_refuses_what_it_cannot_do():
    with pytest.raises(MlpMagicError, match="no failure to inspect"):
        postmortem.run_in_frame("1")
    keep_failure_of(failed_cell())
    frames = postmortem.failure_summary()["frames"]
    with pytest.raises(MlpMagicError, match=f"--frame {frames} is out of range: this rank has {frames} "):
        postmortem.run_in_frame("1", frames)
    with pytest.raises(NameError):
        postmortem.run_in_frame("undefined_here", 0)


def test_where_lists_user_frames_with_their_locals():
    keep_failure_of(failed_cell())
    text = postmortem.where_text()
    assert "[frame 0] " in text and ", in inner" in text
    assert "          values: list = [10, 10, 10]" in text
    assert ("          grid: numpy.ndarray (2, 3) float32 = "
            "array([[0., 0., 0.], [0., 0., 0.]], dtype=float32)") in text
    assert "[frame 1] " in text and "          x: int = 5" in text
    assert "np: module" not in text
    assert text.rstrip().endswith("ValueError: bad total 30 (2, 3)")


def test_a_top_level_frame_shows_the_names_its_code_uses():
    namespace = {"__name__": "__main__", "np": np, "weights": np.ones(4), "unused": 1, "outer": outer}
    code = compile("scale = 2\nresult = weights * scale\nouter(int(result[0]))\n", "/home/ana/run.py", "exec")
    try:
        exec(code, namespace)
    except ValueError as caught:
        keep_failure_of(failed_cell(error=caught))
    text = postmortem.where_text()
    top = text[text.index("/home/ana/run.py"):text.index(", in outer")]
    assert "scale: int = 2" in top and "weights: numpy.ndarray (4,) float64" in top
    assert "result: numpy.ndarray" in top
    for hidden in ("unused", "np:", "outer:", "__name__"):
        assert hidden not in top


class Shaped:
    shape = property(lambda self: 1 / 0)

    def __repr__(self):
        raise RuntimeError("no repr")


def test_values_that_resist_summaries():
    assert postmortem._summarise("s", Shaped()).shape == ""
    assert postmortem._summarise("s", Shaped()).text.startswith("<Shaped instance at ")  # reprlib's fallback
    assert postmortem._summarise("k", np.ndarray).shape == ""          # a class's shape is no shape
    assert postmortem._summarise("n", 7) == postmortem.LocalSummary("n", "int", "", "", "7")
    long = postmortem._summarise("big", list(range(10_000))).text
    assert len(long) < 200


def test_script_problems(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    assert script_problem(str(script)) == ""
    assert script_problem(str(tmp_path / "nope.py")) == "no such file"
    assert script_problem(str(tmp_path)) == "is a folder, not a script"


class BrokenMessage(Exception):
    def __str__(self):
        raise RuntimeError("broken str")


def test_an_exception_whose_str_raises_is_still_inspectable():
    try:
        raise BrokenMessage()
    except BrokenMessage as caught:
        keep_failure_of(failed_cell(error=caught))
    summary = postmortem.failure_summary()
    assert summary["error"] == "BrokenMessage: <str() failed: RuntimeError>"
    assert "BrokenMessage: <str() failed: RuntimeError>" in postmortem.where_text()


def test_exec_made_code_and_cython_sources_get_no_frame_number():
    import dataclasses

    @dataclasses.dataclass
    class Batch:
        size: int

        def __post_init__(self):
            raise ValueError(f"bad size {self.size}")

    def make(size):
        return Batch(size)

    try:
        make(3)
    except ValueError as caught:
        keep_failure_of(failed_cell(error=caught))
    # __post_init__ (frame 0) is called from the dataclass's exec-made __init__ ("<string>"),
    # which has no number: frame 1 is make(), the user's caller
    text = postmortem.where_text()
    assert "[frame 0] " in text and text.split("[frame 0] ")[1].split("\n")[0].endswith("in __post_init__")
    assert text.split("[frame 1] ")[1].split("\n")[0].endswith("in make"), text
    assert postmortem.run_in_frame("size", frame=1) == 3
