"""What one rank (``%%mpirun``) or one host (``%allrun``) produced: plain values, no I/O."""
from __future__ import annotations

from .records import Record, fresh

# Rank statuses.
OK = "ok"
ERROR = "error"            # the cell raised on this rank
TIMEOUT = "timeout"        # still running when --timeout passed
DIED = "died"              # the engine process went away during the cell
INTERRUPTED = "interrupted"
# Host statuses (allrun) add these.
FAILED = "failed"          # the command exited non-zero
UNREACHABLE = "unreachable"


class RankResult(Record):
    """One rank's share of one cell."""

    rank: int
    host: str
    status: str = OK
    stdout: str = ""
    stderr: str = ""
    error: str = ""          # formatted traceback, plain text, when status == ERROR
    duration: float | None = None  # seconds the cell ran on this rank
    displays: list = fresh(list)  # rich outputs: list of mimebundle dicts
    truncated: bool = False  # display was capped; the log holds everything

    @property
    def key(self) -> int:
        return self.rank


class HostResult(Record):
    """One host's share of one ``allrun`` command."""

    host: str
    status: str = OK         # ok | failed | timeout | unreachable
    exit_code: int | None = 0
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0

    @property
    def key(self) -> str:
        return self.host

    def to_json(self) -> dict:
        return {
            "host": self.host,
            "status": self.status,
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "seconds": round(self.seconds, 3),
        }
