"""Fuzz every reader of a file the user names (hostfiles, saved topologies, replay captures,
scripts) with random bytes, huge files and special files: a result or one MlpMagicError line that
never repeats the file, within a bound; never another exception, never a hang."""
from __future__ import annotations

import os
import signal
import tempfile

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.debugging.rank.script import ScriptSyntaxError, _compiled, script_problem
from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu.replay import load_capture
from tests.unit.fuzz_checks import FUZZ

MARKED = b"".join(b"marker%d %s\n" % (i, b"x" * i) for i in range(40))   # a message quotes one line at most
BOUND_S = 10                     # a reader that takes longer hangs, as far as the user can tell

CONTENTS = (st.binary(max_size=600) | st.text(max_size=600).map(str.encode)
            | st.sampled_from([b"worker0 slots=8\n", b"\xff\xfe\x00\x00", b"a" * 5000, b"\n" * 300,
                               b"GPU0\tX\tNV18\nGPU1\tNV18\tX\n", b'{"format": 1}\n', b"x = 1\nif x >\n"]))
SPECIAL = st.sampled_from(["/dev/zero", "/dev/null", "fifo", "folder", "link-to-zero", "huge", "missing"])


def special_path(kind: str, folder: str) -> str:
    path = os.path.join(folder, kind)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        os.mkdir(path)
    elif kind == "link-to-zero":
        os.symlink("/dev/zero", path)
    elif kind == "huge":   # sparse: costs nothing to make, would cost 100 MiB to read whole
        with open(path, "wb") as handle:
            handle.truncate(100 << 20)
    elif kind != "missing":
        return kind
    return path


def readers(path: str):
    yield "hostfile", lambda: topology_from_environment({}, hostfile=path)
    yield "replay", lambda: load_capture([path])
    yield "script", lambda: script_problem(path) or _compiled(path)


def bounded(call):
    """(result, MlpMagicError or None); anything else, or past BOUND_S, fails the test."""
    def too_long(*_):
        raise TimeoutError(f"a reader took more than {BOUND_S} s")
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(BOUND_S)
    try:
        return call(), None
    except MlpMagicError as error:
        return None, error
    except ScriptSyntaxError as error:   # shown as Python shows it: its own lines, not ours
        return error, None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_refusal(error: MlpMagicError | None, name: str) -> None:
    if error is None:
        return
    message = str(error)
    assert message and "\n" not in message and len(message) < 400, (name, message)
    assert sum(f"marker{i} " in message for i in range(40)) <= 1, (name, message)


@FUZZ
@given(content=CONTENTS)
@example(content=MARKED)
@example(content=MARKED + b"\xff" * 10)
def test_random_bytes_in_a_named_file(content):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "given")
        with open(path, "wb") as handle:
            handle.write(content)
        for name, call in readers(path):
            result, error = bounded(call)
            check_refusal(error, name)
            if isinstance(result, ScriptSyntaxError):   # as Python shows it: the file, then the error
                shown = result._render_traceback_()
                errors = ("SyntaxError: ", "IndentationError: ", "TabError: ")
                assert path in "\n".join(shown) and shown[-1].startswith(errors), shown


@FUZZ
@given(kind=SPECIAL)
def test_special_files_are_refused_in_one_line_without_being_read(kind):
    with tempfile.TemporaryDirectory() as folder:
        path = special_path(kind, folder)
        for name, call in readers(path):
            result, error = bounded(call)
            check_refusal(error, name)
            if kind in ("/dev/zero", "fifo", "folder", "link-to-zero", "huge", "missing"):
                assert error is not None or (name == "script" and isinstance(result, str) and result), \
                    (name, kind, result)


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "folder", "huge"])
def test_the_script_check_names_what_is_wrong(kind, tmp_path):
    problem = script_problem(special_path(kind, str(tmp_path)))
    assert problem in ("is a pipe or a device, not a script", "is a folder, not a script",
                       "is larger than 64 MiB: not a script")
