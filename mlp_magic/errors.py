"""The error types users see, each shown as one line, never a traceback.

- ``MlpMagicError``: bad input or an environment problem, raised before anything runs (or
  instead of running it); its message names the offending thing (file and line, option, value).
- ``Failure``: the command ran, and some ranks or hosts did not succeed. Raised after the
  grouped output is on screen, so that "Run all" stops at this cell; the details are already
  shown above it. ``RankFailure`` (``%%mpirun``) and ``HostFailure`` (``%allrun``) say which.

Standard library only: every layer, the pure core included, may import this module.
"""


class MlpMagicError(Exception):
    """Bad input or an environment problem, worded for the user."""

    def _render_traceback_(self):  # IPython shows this instead of a traceback
        return [f"mlp_magic: {self}"]


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
