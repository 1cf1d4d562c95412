"""A rank's py-spy samples read back as the cell's stacks, and where its time went."""
from collections import Counter

from hypothesis import given, strategies as st

from mlp_magic.profile.pure.samples import collective_of, parse_raw, stack_text, where_it_went
from mlp_magic.stacks.pure.frames import CELL, Frame

CELL_FILE = "/tmp/ipykernel_4711/1234567.py"
IPP = "/venv/lib/python3.11/site-packages/ipyparallel/engine/__main__.py"
ENGINE = (f"thread (4711): MainThread;<module> ({IPP}:4);"
          "run_cell (/venv/lib/python3.11/site-packages/IPython/core/interactiveshell.py:3100)")
C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
LOGGER = "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"
# As py-spy 0.4 writes it with --threads --idle --full-filenames (one line per distinct stack).
RAW = "\n".join([
    f"{ENGINE};<module> ({CELL_FILE}:9);slow_step ({CELL_FILE}:4) 93",
    f"{ENGINE};<module> ({CELL_FILE}:11);wrapper ({LOGGER}:81);all_reduce ({C10D}:2950) 7",
    "thread (4713): Thread-2 (heartbeat);run (/usr/lib/python3.11/threading.py:975) 100",
    f"{ENGINE};<lambda> (<string>:1);stop (/x/mlp_magic/profile/rank/sampler.py:80) 3",
    f"thread (4711): MainThread;<module> ({IPP}:4) 50",
])


def test_the_main_threads_samples_in_the_cell_are_kept_from_the_cell_on():
    stacks = parse_raw(RAW)
    assert sum(stacks.values()) == 100   # not the heartbeat, our own call, nor the idle engine
    assert Counter({(Frame(CELL, 9, "<module>"), Frame(CELL, 4, "slow_step")): 93}) \
        == Counter({k: v for k, v in stacks.items() if len(k) == 2})
    assert all(frames[0] == Frame(CELL, frames[0].line, "<module>") for frames in stacks)


def test_the_time_goes_to_the_users_lines_and_the_collectives_it_waited_in():
    spent = where_it_went(parse_raw(RAW))
    assert spent == Counter({"slow_step (cell:4)": 93, "in all_reduce": 7})


def test_mpi_calls_are_collectives_when_native_frames_name_them():
    frames = (Frame(CELL, 3, "<module>"), Frame("/usr/lib/libmpi.so.40", 0, "PMPI_Allreduce"))
    assert collective_of(frames) == "MPI_Allreduce"
    assert collective_of((Frame(CELL, 3, "<module>"),)) is None


def test_lines_that_are_not_py_spys_are_skipped():
    assert parse_raw("garbage\n\nthread (1): MainThread;x (a.py:1) notacount\n") == Counter()


@given(st.lists(st.tuples(st.sampled_from(["f", "g", "h"]), st.integers(1, 400)), min_size=1, max_size=6),
       st.integers(1, 10 ** 6))
def test_a_stack_written_as_text_reads_back_the_same(calls, count):
    frames = (Frame(CELL, 1, "<module>"),) + tuple(Frame("/home/me/train.py", line, name)
                                                   for name, line in calls)
    raw = f"thread (7): MainThread;<module> ({CELL_FILE}:1);{stack_text(frames[1:])} {count}"
    assert parse_raw(raw) == Counter({frames: count})
