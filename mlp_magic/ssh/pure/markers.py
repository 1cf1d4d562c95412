"""The remote wrapper's two marker lines on a host's stderr (``ssh/argv.WRAPPER``), found and
taken out of the output: the start (``<start marker><pid>__``: the command's process group) and
the end (``<end marker><status>__``: the command ended with that status; a process it left in
the background may still hold the channel). Each marker begins with a token the command cannot
know, so nothing the command prints is taken for one."""
from __future__ import annotations

_TAIL = b"__"
_LONGEST_NUMBER = 20   # digits of a pid or an exit status, with room to spare


def started_pid(line: bytes, marker: bytes) -> int | None:
    """The pid a start-marker ``line`` (without its newline) names, or None for any other line."""
    if not line.startswith(marker) or not line.endswith(_TAIL):
        return None
    pid = line[len(marker):-len(_TAIL)]
    return int(pid) if pid.isdigit() else None


def cut_end_marker(buffer: bytes, marker: bytes) -> tuple[bytes, bytes, int | None]:
    """Look for the end-marker line in ``buffer``, output as it arrives (chunks cut anywhere):
    ``(output, held, status)``. ``output`` is the buffer less that line; ``status`` the exit
    status it says, or None while it has not come. Until then the end of the buffer that may be
    the start of the marker is ``held``: the caller puts it before the next chunk."""
    start = 0
    while (at := buffer.find(marker, start)) >= 0:
        end = buffer.find(b"\n", at)
        line_end = len(marker) + _LONGEST_NUMBER + len(_TAIL)
        if end < 0 and len(buffer) - at <= line_end:
            return buffer[:at], buffer[at:], None    # the rest of the line comes with the next chunk
        status = buffer[at + len(marker):end] if end >= 0 else b""
        if status.endswith(_TAIL) and status[:-len(_TAIL)].isdigit():
            return buffer[:at] + buffer[end + 1:], b"", int(status[:-len(_TAIL)])
        start = at + 1
    held = _prefix_at_the_end(buffer, marker)
    return buffer[:len(buffer) - held], buffer[len(buffer) - held:], None


def _prefix_at_the_end(buffer: bytes, marker: bytes) -> int:
    """The length of the longest end of ``buffer`` that begins ``marker`` (short of all of it)."""
    for length in range(min(len(marker) - 1, len(buffer)), 0, -1):
        if buffer.endswith(marker[:length]):
            return length
    return 0
