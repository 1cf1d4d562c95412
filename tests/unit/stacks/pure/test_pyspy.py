"""py-spy's JSON and its failures, read from what py-spy 0.4 really printed (tests/fixtures/pyspy:
a process with an idle and a busy thread; stderr for a gone pid, a non-Python process and a
ptrace refused by a dropped CAP_SYS_PTRACE)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mlp_magic.stacks.pure.pyspy import (GONE, NOT_PYTHON, OTHER, PTRACE, DumpError, classify_failure,
                                         frames_of, parse_dump_json)
from mlp_magic.stacks.pure.frames import Frame, frame_text

from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import dumps, hostile

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "pyspy"


def test_a_real_dump_main_thread_first_outermost_first():
    pid = int((FIXTURES / "two_threads.pid").read_text())
    threads = parse_dump_json((FIXTURES / "two_threads.json").read_text(), pid)
    assert [(t["name"], t["main"], t["idle"]) for t in threads] == [
        ("MainThread", True, True), ("busy", False, False), ("idle-1", False, True)]
    main = frames_of(threads[0])
    assert [(f.function, f.line) for f in main] == [("<module>", 9), ("main", 8)]
    assert main[0].file == "<string>" and frame_text(main[0]) == "<string>:9 <module>"   # python -c
    assert [f.function for f in frames_of(threads[1])][-1] == "busy"


def test_a_notebook_cell_is_one_frame_on_every_rank():
    thread = {"thread_name": "MainThread", "os_thread_id": 5, "active": True,
              "frames": [{"name": "<module>", "filename": "/tmp/ipykernel_5/3135.py", "line": 3}]}
    [record] = parse_dump_json(json.dumps([thread]), 5)
    assert frames_of(record) == (Frame("<cell>", 3, "<module>"),)


def test_unnamed_native_frames_merge_across_processes():
    thread = {"thread_name": "MainThread", "os_thread_id": 5, "active": True,
              "frames": [{"name": "0x7fa09a44524a", "filename": "/lib/libc.so.6", "line": 0},
                         {"name": "<module>", "filename": "/a/t.py", "line": 3}]}
    [record] = parse_dump_json(json.dumps([thread]), 5)
    assert frames_of(record) == (Frame("/a/t.py", 3, "<module>"), Frame("/lib/libc.so.6", 0, "??"))


@pytest.mark.parametrize("text", ["", "not json", "{}", "[1]", '[{"frames": [{"line": "x"}]}]'])
def test_output_that_is_not_a_dump_is_one_error(text):
    with pytest.raises(DumpError, match="py-spy"):
        parse_dump_json(text, 1)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
                    max_leaves=12)


@given(JSON)
def test_any_json_is_a_dump_or_one_error(data):
    try:
        threads = parse_dump_json(json.dumps(data), 1)
    except DumpError:
        return
    assert all(isinstance(frames_of(t), tuple) for t in threads)


REAL = json.loads((FIXTURES / "two_threads.json").read_text())


@FUZZ
@given(hostile(REAL))
@example([dict(REAL[0], frames=[dict(REAL[0]["frames"][0], line=float("inf"))])])   # OverflowError
@example([dict(REAL[0], frames=[dict(REAL[0]["frames"][0], line=2 ** 63)])])   # a line no file has
def test_a_real_dump_with_hostile_values_is_threads_or_one_error(data):
    try:
        threads = parse_dump_json(dumps(data), int((FIXTURES / "two_threads.pid").read_text()))
    except DumpError as error:
        assert "\n" not in str(error)
        return
    for record in threads:
        assert isinstance(record["name"], str) and isinstance(record["idle"], bool)
        assert all(type(line) is int and 0 <= line < 2 ** 31 for _, line, _ in record["frames"])
        frames_of(record)


@pytest.mark.parametrize("name, cause, says", [
    ("ptrace.txt", PTRACE, "Permission denied"),
    ("gone.txt", GONE, "exited"),
    ("not_python.txt", NOT_PYTHON, "not a Python process"),
])
def test_failures_are_named_by_their_cause(name, cause, says):
    found, message = classify_failure((FIXTURES / name).read_text())
    assert found == cause and says in message and "\n" not in message


def test_an_unknown_failure_keeps_py_spys_first_line():
    failure = "Error: something new\n\nCaused by:\n    0: deeper\n"
    assert classify_failure(failure) == (OTHER, "something new (deeper)")
    assert classify_failure("") == (OTHER, "py-spy failed without a message")
