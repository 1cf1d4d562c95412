"""A rank's faulthandler dump -> its stack for the merged hang report; how every frame reads."""
from __future__ import annotations

import pytest

from mlp_magic.core.source_files import short_path
from mlp_magic.stacks.pure.frames import IDLE, NO_STACK, Frame, frame_text, rank_frames

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
