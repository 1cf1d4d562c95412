"""Whether ``pip`` on the notebook's PATH installs for the ranks' Python (the kernel's side).

Jupyter often starts a venv's kernel by its interpreter's path, without the venv's ``bin/`` on
PATH: ``%allrun pip`` and ``%pip`` are the ranks' Python's then, but ``!pip install x`` in a cell
(or ``pip`` in the notebook's terminal) is another Python's, and what it installs the ranks never
import. Read-only: the pip found is read (its first lines), never run.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Mapping


def pip_on_path(env: Mapping, python: str) -> tuple:
    """(the ``pip`` that ``env``'s PATH finds, the Python it installs for or "" when it cannot
    tell) where that is not ``python``; () where it is, or where PATH has no pip."""
    found = shutil.which("pip", path=env.get("PATH", ""))
    if not found:
        return ()
    if os.path.realpath(os.path.dirname(found)) == os.path.realpath(os.path.dirname(python)):
        return ()
    runs = _interpreter(found)
    if runs and os.path.realpath(runs) == os.path.realpath(python):
        return ()
    return (found, runs)


def _interpreter(script: str) -> str:
    """The Python a pip script starts: its ``#!`` line, or the ``exec`` line pip writes under
    ``#!/bin/sh`` where the interpreter's path is too long for one; "" for anything else (a
    pyenv shim, a binary)."""
    try:
        with open(script, "rb") as handle:
            head = handle.read(512).decode(errors="replace").splitlines()
    except OSError:
        return ""
    if not head or not head[0].startswith("#!"):
        return ""
    words = head[0][2:].split()
    if words and words[0] in ("/bin/sh", "/usr/bin/sh") and len(head) > 1 and "exec'" in head[1]:
        words = [head[1].split("exec'", 1)[1].strip().split()[0].strip("\"'")]
    return words[0] if words and "python" in os.path.basename(words[0]) else ""
