"""``%mpirun script.py args``: run a script on a rank as ``mpiexec python script.py args`` would.

``sys.argv`` is the script and its arguments, ``__name__`` is ``"__main__"``, ``__file__`` the
script's path, and its folder leads ``sys.path`` (and stays there: the script's functions may
import its neighbours when called from a later cell). It runs in the rank's namespace, as
``%run -i`` does, so its globals are there afterwards for inspection. ``sys.exit(0)`` is a
success, any other status a failure.
"""
from __future__ import annotations

import os
import sys

from .bootstrap import engine_shell


class ScriptExit(Exception):
    """The script called sys.exit with a failing status."""


def script_problem(path: str) -> str:
    """Why ``path`` cannot be run on this rank ("" when it can)."""
    if not os.path.exists(path):
        return "no such file"
    if os.path.isdir(path):
        return "is a folder, not a script"
    if not os.access(path, os.R_OK):
        return "cannot be read"
    return ""


def run_script(path: str, argv: list) -> None:
    """``path``: absolute; ``argv``: sys.argv as the script should see it (argv[0] as typed)."""
    __tracebackhide__ = True  # noqa: F841 - IPython's traceback leaves this frame out
    namespace = engine_shell().user_ns
    with open(path, "rb") as handle:
        code = compile(handle.read(), path, "exec", dont_inherit=True)
    folder = os.path.dirname(path)
    if folder in sys.path:   # first, and only once: scripts run one after another stay bounded
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    saved_argv, saved_name, saved_file = sys.argv, namespace.get("__name__"), namespace.get("__file__")
    sys.argv = list(argv)
    namespace.update(__name__="__main__", __file__=path)
    try:
        exec(code, namespace)
    except SystemExit as done:
        if done.code not in (None, 0):
            status = done.code if isinstance(done.code, int) else 1
            if not isinstance(done.code, int):
                print(done.code, file=sys.stderr)   # as Python does with sys.exit("message")
            # the script's frames stay on the traceback, for a post-mortem
            failure = ScriptExit(f"{argv[0]} exited with status {status}")
            raise failure.with_traceback(done.__traceback__) from None
    finally:
        sys.argv = saved_argv
        namespace["__name__"] = saved_name
        # a later cell is `python -c` again: multiprocessing's spawn would re-run a __file__ it saw
        if saved_file is None:
            namespace.pop("__file__", None)
        else:
            namespace["__file__"] = saved_file
