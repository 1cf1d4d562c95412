"""Run inside a rank for ``-o NAME``: the whole text of this rank's logs of a cell.

The rank wrote them itself (engine/capture) on its own host, so only the rank can read them
wherever the notebook runs. ``cap`` bounds what one rank sends (``$MLP_MAGIC_PULL_CAP``, as for
``--pull``): a larger log stays on disk, and the rank says so in one line.
"""
from __future__ import annotations

import os


class Unread:
    """A log the rank could not send: ``message`` says why, in one line."""

    def __init__(self, message: str):
        self.message = message


def whole_logs(paths: list, cap: int) -> list:
    """Each log's text (UTF-8, as the rank wrote it), or an Unread saying why not."""
    return [_whole_log(path, cap) for path in paths]


def _whole_log(path: str, cap: int):
    try:
        with open(path, "rb") as log:
            size = os.fstat(log.fileno()).st_size
            if size > cap:
                return Unread(f"its log {path} holds {size:,} bytes, over the {cap:,} one rank may "
                              "send (MLP_MAGIC_PULL_CAP)")
            return log.read(cap + 1).decode("utf-8", "replace")
    except OSError as err:
        return Unread(f"its log {path} cannot be read: {err.strerror or err}")
