"""Reading a file the user names: bounded, never a device or a pipe, its error in one short line.

Hostfiles, saved ``nvidia-smi topo -m`` texts, replay captures and scripts all come through
``read_text``: ``/dev/zero`` or a FIFO is refused before it is read (a device never ends, opening
a FIFO waits for a writer), a folder is named as one, a file past the bound is refused at the
bound (never read whole into memory), and an error quotes at most ``QUOTED`` characters of a
path or a value, never the file's content.
"""
from __future__ import annotations

import os
import stat

QUOTED = 80   # characters of a path (or anything else of the user's) an error shows


# The error's type and quoting are imported when a file is refused: a rank reads its script
# through this module, and one read well needs neither (docs/performance.md, "What an engine loads").
def shown(text: str, limit: int = QUOTED) -> str:
    """``text`` as a message shows it (core/ranges.quote: repr'd, one short line)."""
    from mlp_magic.core.ranges import quote

    return quote(text, limit)


def _refused(message: str) -> Exception:
    """The one error of a file refused: an MlpMagicError, its message ``message``."""
    from mlp_magic.errors import MlpMagicError

    return MlpMagicError(message)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "a pipe, not a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a file"
    return "not a regular file"


def read_bytes(path: str, what: str, max_bytes: int) -> bytes:
    """The file's bytes; one MlpMagicError naming ``what`` and the path when it is missing,
    unreadable, not a regular file, or larger than ``max_bytes``."""
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise _refused(f"{what} {shown(path)}: {_kind(mode)}")
        # O_NONBLOCK: a file swapped for a FIFO since the stat must not block the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise _refused(f"{what} {shown(path)}: no such file") from None
    except (OSError, ValueError) as err:   # ValueError: a NUL byte in the path
        why = getattr(err, "strerror", None) or str(err)
        raise _refused(f"{what} {shown(path)}: cannot read it: {why}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise _refused(f"{what} {shown(path)}: not a regular file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _refused(f"{what} {shown(path)}: larger than {_size(max_bytes)}, not a file of this "
                       "kind")
    return data


def read_text(path: str, what: str, max_bytes: int) -> str:
    """The file's text (UTF-8), with ``read_bytes``'s checks; a file that is not text is named
    with the offset of its first bad byte."""
    data = read_bytes(path, what, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _refused(f"{what} {shown(path)}: not UTF-8 text (byte {err.start}: "
                       f"{err.reason})") from None


def _size(count: int) -> str:
    return f"{count >> 20} MiB" if count >= 1 << 20 else f"{count >> 10} KiB"
