"""A rank's faulthandler dump -> its stack for the merged hang report; how every frame reads."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from mlp_magic.core.source_files import short_path
from mlp_magic.stacks.pure.frames import IDLE, NO_STACK, Frame, frame_text, from_the_cell, rank_frames

# What faulthandler writes for an engine blocked in a cell (ipykernel's frames above the cell).
BLOCKED = """Thread 0x00007f0000000002 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait

Current thread 0x00007f0000000001 (most recent call first):
  File "/tmp/ipykernel_4242/3135.py", line 3 in <module>
  File "/venv/lib/python3.11/site-packages/IPython/core/interactiveshell.py", line 3577 in run_code
  File "/venv/lib/python3.11/site-packages/ipykernel/kernelapp.py", line 739 in start
"""
IDLE_DUMP = """Current thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/selectors.py", line 468 in select
  File "/venv/lib/python3.11/site-packages/ipykernel/kernelapp.py", line 739 in start
"""


def test_a_blocked_rank_starts_at_its_cell_under_one_name_for_every_rank():
    frames = rank_frames(BLOCKED)
    assert frames == (Frame("<cell>", 3, "<module>"),)
    assert rank_frames(BLOCKED.replace("4242", "4343")) == frames   # another rank's kernel pid
    assert [frame_text(f) for f in frames] == ["cell:3 <module>"]


@pytest.mark.parametrize("dump, expected", [(IDLE_DUMP, IDLE), ("", NO_STACK), ("garbage\n", NO_STACK)])
def test_idle_and_unreadable_ranks_are_one_pseudo_frame(dump, expected):
    assert rank_frames(dump) == (expected,)


@pytest.mark.parametrize("path, shown", [
    ("/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
     "torch/distributed/distributed_c10d.py"),
    ("/usr/lib/python3/dist-packages/numpy/core.py", "numpy/core.py"),
    ("/usr/lib/python3.11/site-packages/x.py", "x.py"),
    ("/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py", "threading.py"),
    ("/home/me/project/train.py", "train.py"),
    ("/tmp/ipykernel_1/2.py", "cell"),
    ("<frozen runpy>", "<frozen runpy>"),
])
def test_short_path(path, shown):
    assert short_path(path) == shown


def test_frame_text_and_user_code():
    assert frame_text(Frame("/home/me/train.py", 88, "step")) == "train.py:88 step"
    assert frame_text(Frame("/usr/lib/libmpi.so.40", 0, "PMPI_Barrier")) == "PMPI_Barrier [libmpi.so.40]"
    assert frame_text(IDLE) == "idle: not running a cell"
    assert Frame("/home/me/train.py", 1, "f").is_user and not Frame("/usr/lib/libmpi.so.40", 0, "f").is_user
    assert not Frame("/venv/lib/python3.11/site-packages/a.py", 1, "f").is_user


# ``%mpirun train.py`` on a host with mlp_magic in a checkout (not site-packages): the generated
# cell, then the runner's frames, then the script's.
SCRIPT_RUN = [Frame("/venv/lib/python3.11/site-packages/ipykernel/kernelapp.py", 739, "start"),
              Frame("/tmp/ipykernel_4242/3135.py", 2, "<module>"),
              Frame("/src/mlp_magic/debugging/rank/script.py", 91, "run_script"),
              Frame("/src/mlp_magic/debugging/rank/script.py", 127, "_run"),
              Frame("/home/me/train.py", 4, "<module>"),
              Frame("/home/me/train.py", 3, "step")]


def test_a_script_reads_from_its_first_frame_without_the_runner_around_it():
    """The script's tree showed mlp_magic's own `script.py:91 run_script` (and the generated cell)."""
    assert [frame_text(f) for f in from_the_cell(SCRIPT_RUN)] == ["train.py:4 <module>", "train.py:3 step"]


def test_a_cell_that_calls_into_the_runner_keeps_its_own_frame():
    """Only the generated cell (nothing but cells above the runner) is the runner's: a script
    that stops inside the runner itself keeps every frame."""
    stopped_in_runner = SCRIPT_RUN[:4]
    assert [frame_text(f) for f in from_the_cell(stopped_in_runner)] == [
        "cell:2 <module>", "script.py:91 run_script", "script.py:127 _run"]


frame_files = st.sampled_from(["/venv/lib/python3.11/site-packages/ipyparallel/engine/app.py",
                               "/usr/lib/python3.11/selectors.py", "<frozen runpy>", "/home/me/train.py"])
frames = st.lists(st.builds(Frame, frame_files, st.integers(0, 500), st.sampled_from(["f", "g"])))


@given(frames, frames)
def test_without_a_cell_an_engine_is_idle_and_with_one_it_starts_there(above, below):
    """An engine between cells (py-spy's frames of its event loop) reads as IDLE, as the hang
    report says of it; with a cell, it reads from the cell on, whatever is above it."""
    assert from_the_cell(above) == (IDLE,)
    cell = Frame("/tmp/ipykernel_7/1.py", 1, "<module>")
    assert from_the_cell(above + [cell] + below) == (Frame("<cell>", 1, "<module>"),) + tuple(below)
