"""What the agent's ops do to this host: SIGINT, the unblock or the progress signal to its ranks,
the tail of a rank's log.

Both are careful with what a request names, as a network peer wrote it (an authenticated one,
but a mistake costs a stranger's process or a private file):
- ``interrupt_ranks``, ``unblock_ranks`` and ``progress_ranks`` signal only the ranks the agent
  was started with, and each only while its pid still belongs to the process it was given: the same start time
  (``create_time``, as ``psutil.Process(pid).create_time()`` gives it, from /proc), so a pid the kernel
  reused for another process is never signalled.
- ``tail_log`` reads only ``rank<N>.stdout`` or ``rank<N>.stderr`` inside a cell's log folder
  that lies, links resolved, under the agent's log root, at most 1 MiB, from the end.
Bad requests raise ``protocol.RequestError`` (one error line for the client).
"""
from __future__ import annotations

import errno
import os
import signal
import stat

from mlp_magic.core import proc_stat
from mlp_magic.agent.protocol import RequestError
from mlp_magic.engine.side_signal import PROGRESS_SIGNAL, UNBLOCK_SIGNAL

STREAMS = ("stdout", "stderr")
DEFAULT_TAIL = 64 * 1024
MAX_TAIL = 1024 * 1024
# psutil's create_time and ours are computed alike (boot time + start ticks); a reused pid
# started at another moment: in practice seconds apart, never within this.
SAME_START_S = 0.5


def start_time(pid: int, proc_root: str = "/proc") -> tuple:
    """(epoch seconds the process started, its state letter), or (None, None) when it is gone."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat"), "rb") as file:
            stat_text = file.read()
        with open(os.path.join(proc_root, "stat"), "rb") as file:
            boot_text = file.read()
    except OSError:
        return None, None
    parsed = proc_stat.parse_stat(stat_text)
    started = proc_stat.create_time(stat_text, boot_text, os.sysconf("SC_CLK_TCK"))
    return (None, None) if parsed is None or started is None else (started, parsed[0])


def _rank_list(value, known: dict) -> list:
    """The ranks a request names (all the agent's when it names none), checked."""
    if value is None:
        return sorted(known)
    if not isinstance(value, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in value):
        raise RequestError("ranks: expected a list of rank numbers")
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise RequestError(f"ranks {unknown[:10]} are not on this host's agent")
    return sorted(set(value))


def interrupt_ranks(ranks: dict, wanted=None, proc_root: str = "/proc", kill=os.kill) -> dict:
    """SIGINT the ranks (``{rank: {"pid", "create_time"}}``, the agent's; ``wanted``: a subset)
    whose process still runs: {"signalled": [ranks], "gone": [ranks]}."""
    return signal_ranks(ranks, wanted, signal.SIGINT, proc_root, kill)


def unblock_ranks(ranks: dict, wanted=None, proc_root: str = "/proc", kill=os.kill) -> dict:
    """``UNBLOCK_SIGNAL`` to the ranks that catch it (unblock/rank/side: one that does not would
    die of it): {"signalled", "gone", "deaf": [ranks without the unblock thread]}."""
    return signal_ranks(ranks, wanted, UNBLOCK_SIGNAL, proc_root, kill)


def progress_ranks(ranks: dict, wanted=None, proc_root: str = "/proc", kill=os.kill) -> dict:
    """``PROGRESS_SIGNAL`` to idle ranks that catch it (unblock/rank/mpi_world): each drives MPI's
    progress until a revocation reaches it; the same answer as ``unblock_ranks``."""
    return signal_ranks(ranks, wanted, PROGRESS_SIGNAL, proc_root, kill)


def signal_ranks(ranks: dict, wanted, signum: int, proc_root: str = "/proc", kill=os.kill) -> dict:
    """``signum`` to the ranks whose process still runs (checked by start time); a signal other
    than SIGINT only where the process catches it."""
    answer: dict = {"signalled": [], "gone": []}
    for rank in _rank_list(wanted, ranks):
        # checked here too (the setup line is JSON): a pid we may not signal (0, -1, 1, past a C
        # int), or a start time that is no number (NaN would pass the comparison below)
        pid = proc_stat.process_id(ranks[rank].get("pid"))
        created = proc_stat.start_time(ranks[rank].get("create_time"))
        started, state = (None, None) if pid is None or created is None else start_time(pid, proc_root)
        if started is None or state in ("Z", "X") or abs(started - created) > SAME_START_S:
            answer["gone"].append(rank)
            continue
        if signum != signal.SIGINT and not proc_stat.catches(_read_status(pid, proc_root), signum):
            answer.setdefault("deaf", []).append(rank)
            continue
        try:
            kill(pid, signum)
            answer["signalled"].append(rank)
        except ProcessLookupError:
            answer["gone"].append(rank)
        except PermissionError:
            raise RequestError(f"not allowed to signal rank {rank} (pid {pid})") from None
    return answer


def _read_status(pid: int, proc_root: str) -> str:
    try:
        with open(os.path.join(proc_root, str(pid), "status")) as file:
            return file.read()
    except OSError:
        return ""


def _tail_arguments(request: dict) -> tuple:
    rank, stream = request.get("rank"), request.get("stream", "stdout")
    wanted, log_dir = request.get("bytes", DEFAULT_TAIL), request.get("log_dir")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise RequestError("rank: expected a rank number")
    if stream not in STREAMS:
        raise RequestError(f"stream: expected {' or '.join(STREAMS)}")
    if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted < 1:
        raise RequestError("bytes: expected a positive number")
    if not isinstance(log_dir, str) or not log_dir or "\0" in log_dir or not _encodable(log_dir):
        raise RequestError("log_dir: expected the cell's log folder")
    return rank, stream, min(wanted, MAX_TAIL), log_dir


def _encodable(path: str) -> bool:
    """Whether a path can be given to the system: JSON's "\\ud800" cannot (UnicodeEncodeError)."""
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        return False
    return True


def _within(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def tail_log(log_root: str, request: dict) -> dict:
    """The last ``bytes`` (<= 1 MiB) of ``<log_dir>/rank<N>.<stream>``: {"text", "size", "truncated"}."""
    rank, stream, wanted, log_dir = _tail_arguments(request)
    root, folder = os.path.realpath(log_root), os.path.realpath(log_dir)
    if not _within(root, folder):
        raise RequestError("log_dir is not under this agent's log root")
    name = f"rank{rank}.{stream}"
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        raise RequestError("no such log folder") from None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
    except OSError as error:
        why = "a link, refused" if error.errno == errno.ELOOP else "no such log"
        raise RequestError(f"{name}: {why}") from None
    finally:
        os.close(folder_fd)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise RequestError(f"{name} is not a regular file")
        start = max(0, status.st_size - wanted)
        data = os.pread(fd, wanted, start)
    finally:
        os.close(fd)
    skip = 0
    while start and skip < min(3, len(data)) and 0x80 <= data[skip] < 0xC0:
        skip += 1   # start where a character begins: no half character shown as garbage
    data = data[skip:]
    return {"text": data.decode("utf-8", "replace"), "size": status.st_size, "truncated": start > 0}
