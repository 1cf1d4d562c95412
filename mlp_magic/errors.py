"""The error types users see, each shown as one line, never a traceback.

- ``MlpMagicError``: bad input or an environment problem, raised before anything runs (or
  instead of running it); its message names the offending thing (file and line, option, value).
- ``Failure``: the command ran, and some ranks or hosts did not succeed. Raised after the
  grouped output is on screen, so that "Run all" stops at this cell; the details are already
  shown above it. ``RankFailure`` (``%%mpirun``) and ``HostFailure`` (``%allrun``) say which.
- ``StacksFault``: ``mlp-magic stacks`` read nothing, for one reason with a known fix.

``unwritable_output``: for the console scripts, whether their output failed (a full disk).

Standard library only: every layer, the pure core included, may import this module.
"""
from __future__ import annotations

import os
import sys


class MlpMagicError(Exception):
    """Bad input or an environment problem, worded for the user."""

    def _render_traceback_(self):  # IPython shows this instead of a traceback
        return [f"mlp_magic: {self}"]


class StacksFault(MlpMagicError):
    """``mlp-magic stacks``: nothing could be read, for one reason with a known fix (its
    message names it). Here, not in ``stacks/__init__``: a rank loads that package for its
    recorder (stacks/rank), and holds no error type of the kernel's."""


class Failure(Exception):
    """Some ranks or hosts did not succeed; ``result`` is what ``-o NAME`` stores for the run."""

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


class RankFailure(Failure):
    """``%%mpirun``: the cell failed, timed out, was interrupted or died on some ranks."""


class HostFailure(Failure):
    """``%allrun``: the command failed, timed out or could not reach some hosts."""


def unwritable_output(error: BaseException | None = None) -> str | None:
    """For a console script: why what it wrote could not be written, in words ("No space left on
    device": a full disk, ``>/dev/full``), or None when it was (or when its reader left, ``|
    head``: nothing to say). ``error``: one just raised, which counts when it is a write's
    (no file named: a write to a descriptor). Standard output is then pointed at /dev/null, so
    that the interpreter's own flush at exit adds no traceback."""
    import errno   # (here: allrun's start imports this module)

    try:
        sys.stdout.flush()
    except (OSError, ValueError) as flushed:
        error = flushed
    else:
        writes = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EPIPE}
        if not (isinstance(error, OSError) and error.errno in writes and error.filename is None):
            return None
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError):
        pass
    if isinstance(error, BrokenPipeError):
        return None
    return getattr(error, "strerror", None) or str(error) or type(error).__name__
