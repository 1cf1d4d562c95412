"""``%mpirun script.py args``: run a script on a rank as ``mpiexec python script.py args`` would.

``sys.argv`` is the script and its arguments, ``__name__`` is ``"__main__"``, ``__file__`` the
script's path, and its folder (a link's target's, as Python's) leads ``sys.path`` (and stays
there: the script's functions may import its neighbours when called from a later cell). It runs
in the rank's namespace, as ``%run -i`` does, so its globals are there afterwards for inspection.
``sys.exit(0)`` is a success, any other status a failure, shown in one line (its frames are
kept for a post-mortem).

What a new process would give each run, a persistent rank gives too: the modules imported from
a script's folder (this one's or an earlier one's) are imported afresh, so an edited neighbour
or another folder's ``utils`` never runs stale; the working folder the script changed to is
restored afterwards; and a run that ends well waits for the non-daemon threads it started, as
Python does before it exits (their output is the script's, not the next cell's).
"""
from __future__ import annotations

import os
import stat
import sys
import threading
import traceback

from mlp_magic.engine import used_once
from mlp_magic.engine.bootstrap import engine_shell

_SCRIPT_FOLDERS: list = []     # every folder a script ran from on this rank, in order


class ScriptExit(Exception):
    """The script called sys.exit with a failing status. Shown as one line, as Python shows
    nothing but the script's own message (argparse's usage and error): the frames stay on its
    traceback for ``--where`` and ``--post-mortem``."""

    def _render_traceback_(self):   # IPython shows this instead of the traceback
        return [f"{type(self).__name__}: {self}"]


class ScriptSyntaxError(Exception):
    """The script does not compile: shown as Python shows it, the file, the line and the caret,
    with none of the frames that ran it."""

    def __init__(self, error: SyntaxError):
        super().__init__(str(error))
        self.lines = traceback.format_exception_only(type(error), error)

    def _render_traceback_(self):
        return [line.rstrip("\n") for line in self.lines]


MAX_SCRIPT_BYTES = 64 << 20


def script_problem(path: str) -> str:
    """Why ``path`` cannot be run on this rank ("" when it can)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except (OSError, ValueError) as err:
        return f"cannot be read ({getattr(err, 'strerror', None) or err})"
    if stat.S_ISDIR(mode):
        return "is a folder, not a script"
    if not stat.S_ISREG(mode):
        return "is a pipe or a device, not a script"
    if not os.access(path, os.R_OK):
        return "cannot be read"
    if os.path.getsize(path) > MAX_SCRIPT_BYTES:
        return f"is larger than {MAX_SCRIPT_BYTES >> 20} MiB: not a script"
    return ""


def run_script(path: str, argv: list) -> None:
    """``path``: absolute; ``argv``: sys.argv as the script should see it (argv[0] as typed)."""
    __tracebackhide__ = True  # noqa: F841 - IPython's traceback leaves this frame out
    namespace = engine_shell().user_ns
    code = _compiled(path)
    folder = os.path.dirname(os.path.realpath(path))
    if folder not in _SCRIPT_FOLDERS:
        _SCRIPT_FOLDERS.append(folder)
    _forget_modules_from(_SCRIPT_FOLDERS)
    if folder in sys.path:   # first, and only once: scripts run one after another stay bounded
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    saved_argv, saved_name, saved_file = sys.argv, namespace.get("__name__"), namespace.get("__file__")
    saved_cwd, threads_before = os.getcwd(), set(threading.enumerate())
    sys.argv = list(argv)
    namespace.update(__name__="__main__", __file__=path)
    try:
        _run(code, namespace, argv[0])
        _wait_for_threads(threads_before)
    finally:
        sys.argv = saved_argv
        namespace["__name__"] = saved_name
        # a later cell is `python -c` again: multiprocessing's spawn would re-run a __file__ it saw
        if saved_file is None:
            namespace.pop("__file__", None)
        else:
            namespace["__file__"] = saved_file
        _change_back(saved_cwd)


def _read(path: str) -> bytes:
    from mlp_magic.machine.user_files import read_bytes

    return read_bytes(path, "script", MAX_SCRIPT_BYTES)


def _compiled(path: str):
    """The script's code, read within a bound; a syntax error as Python shows it, in the file."""
    __tracebackhide__ = True  # noqa: F841
    source = used_once(_read, path)   # not held while the script runs (engine/__init__'s rule)
    try:
        return compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as err:
        if err.filename is None:   # a NUL byte, say: which file, and the line it is on
            err.filename = path
            err.lineno = err.lineno or source[:max(0, source.find(b"\0"))].count(b"\n") + 1
        raise ScriptSyntaxError(err) from None
    except UnicodeDecodeError as err:   # in Python's own words
        line = source[:err.start].count(b"\n") + 1
        raise ScriptSyntaxError(SyntaxError(
            f"Non-UTF-8 code starting with {source[err.start:err.start + 1]!r:.7} in file {path} on line "
            f"{line}, but no encoding declared; see https://peps.python.org/pep-0263/ for details")) from None
    except ValueError as err:   # a NUL byte: Python's own words for it, and the file
        raise ScriptSyntaxError(SyntaxError(f"{err} ({path})")) from None


def _run(code, namespace: dict, name: str) -> None:
    __tracebackhide__ = True  # noqa: F841
    try:
        exec(code, namespace)
    except SystemExit as done:
        if done.code not in (None, 0):
            status = done.code if isinstance(done.code, int) else 1
            if not isinstance(done.code, int):
                print(done.code, file=sys.stderr)   # as Python does with sys.exit("message")
            # the script's frames stay on the traceback, for a post-mortem
            failure = ScriptExit(f"{name} exited with status {status}")
            raise failure.with_traceback(done.__traceback__) from None


def _forget_modules_from(folders: list) -> None:
    """Drop from sys.modules the plain Python modules loaded from these folders, so that the
    script imports them afresh: the user's code only (``core/source_files.is_user_code``: never
    the standard library, an installed package (a folder may hold a virtualenv) or mlp_magic's
    own), and no extension module (those cannot be loaded twice)."""
    roots = tuple(os.path.join(f, "") for f in folders if os.path.dirname(f) != f)   # not "/"
    found = [(name, getattr(module, "__file__", None)) for name, module in list(sys.modules.items())]
    found = [(name, path) for name, path in found
             if isinstance(path, str) and path.endswith(".py") and path.startswith(roots)]
    if not found:
        return
    # imported here: a first script (no module of its folder loaded yet) leaves core/ unloaded on
    # the rank, whose every module counts (docs/performance.md, "What an engine loads")
    from mlp_magic.core.source_files import is_user_code

    for name, path in found:
        if is_user_code(path):
            del sys.modules[name]


def _wait_for_threads(before: set) -> None:
    """As Python waits before it exits: the non-daemon threads the script started end first."""
    for thread in threading.enumerate():
        if thread not in before and not thread.daemon:
            while thread.is_alive():
                thread.join(0.1)   # short waits: a Ctrl-C or a --timeout interrupt still lands


def _change_back(folder: str) -> None:
    try:
        os.chdir(folder)
    except OSError:   # the script removed it: stay where it left the rank
        pass
