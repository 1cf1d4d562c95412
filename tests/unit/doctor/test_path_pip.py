"""doctor/path_pip: which Python the pip on a PATH installs for, read from its first lines."""
from __future__ import annotations

import os

from mlp_magic.doctor.path_pip import pip_on_path


def _pip(folder, text: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pip"
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def test_a_pip_beside_the_ranks_python_or_for_it_is_theirs(tmp_path):
    python = str(tmp_path / "venv" / "bin" / "python")
    beside = _pip(tmp_path / "venv" / "bin", "#!/anything\n")
    assert pip_on_path({"PATH": os.path.dirname(beside)}, python) == ()
    elsewhere = _pip(tmp_path / "links", f"#!{python}\n")   # another folder, the same Python
    assert pip_on_path({"PATH": os.path.dirname(elsewhere)}, python) == ()
    assert pip_on_path({"PATH": str(tmp_path / "empty")}, python) == ()   # no pip at all


def test_another_pythons_pip_is_named_with_the_python_it_is_for(tmp_path):
    python = str(tmp_path / "venv" / "bin" / "python")
    system = _pip(tmp_path / "usr" / "bin", "#!/usr/bin/python3 -E\nimport sys\n")
    assert pip_on_path({"PATH": os.path.dirname(system)}, python) == (system, "/usr/bin/python3")
    long_path = "/very/long/venv/bin/python3.11"   # pip's form where a #! line cannot hold it
    wrapped = _pip(tmp_path / "wrapped", f"#!/bin/sh\n'''exec' \"{long_path}\" \"$0\" \"$@\"\n' '''\n")
    assert pip_on_path({"PATH": os.path.dirname(wrapped)}, python) == (wrapped, long_path)
    shim = _pip(tmp_path / "shims", "#!/usr/bin/env bash\nexec pyenv exec pip \"$@\"\n")
    assert pip_on_path({"PATH": os.path.dirname(shim)}, python) == (shim, "")   # cannot tell: said
