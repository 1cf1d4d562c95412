"""engine/agent_start.error_line: a failed agent's stderr in one line (hypothesis)."""
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.engine.agent_start import error_line

TRACEBACK = """Traceback (most recent call last):
  File "<frozen runpy>", line 189, in _run_module_as_main
ModuleNotFoundError: No module named 'mlp_magic'
"""
FATAL = """Python path configuration:
  PYTHONHOME = '/nonexistent'
Fatal Python error: init_fs_encoding: failed to get the Python codec of the filesystem encoding
Python runtime state: core initialized
ModuleNotFoundError: No module named 'encodings'

Current thread 0x00007f2aaf7ecb80 (most recent call first):
  <no Python frame>
"""


def test_the_exception_is_the_line_given():
    assert error_line(TRACEBACK) == "ModuleNotFoundError: No module named 'mlp_magic'"
    assert error_line(FATAL) == "ModuleNotFoundError: No module named 'encodings'"
    assert error_line("") == "" and error_line("killed\n\n") == "killed"


@given(st.text(max_size=2000))
def test_any_stderr_gives_one_of_its_lines_shortened(text):
    line = error_line(text)
    assert "\n" not in line and "\r" not in line and len(line) <= 300
    lines = [part.strip() for part in text.splitlines() if part.strip()]
    assert (line == "") == (not lines)
    assert not lines or any(part.startswith(line) for part in lines)
    if any("error" in part.lower() for part in lines):
        assert "error" in line.lower() or len(line) == 300
