"""What one rank (``%%mpirun``) or one host (``%allrun``) produced, and what ``-o NAME`` stores.

Plain values, no I/O. ``RankResult`` and ``HostResult`` are one rank's and one host's share of a
run; ``Results`` holds all of them with the same names for the same meaning, whichever command
made it (``MpirunResult``, ``AllrunResult``).
"""
from __future__ import annotations

from mlp_magic.core.records import Record, fresh

# Rank statuses.
OK = "ok"
ERROR = "error"            # the cell raised on this rank
TIMEOUT = "timeout"        # still running when --timeout passed
DIED = "died"              # the engine process went away during the cell
INTERRUPTED = "interrupted"
PAUSED = "paused"          # stopped at a breakpoint: the cell goes on when the debugger says so
RUNNING = "running"        # still running while other ranks are stopped at a breakpoint
QUIT = "quit"              # the debugger was told to quit (`%mpirun --pdb q`, Ctrl-C while stopped)
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


TAIL_CHARS = 300


def last_line(text: str) -> str:
    """The last non-empty line of a host's stderr, shortened: what went wrong, in one line."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= TAIL_CHARS else last[:TAIL_CHARS - 3] + "..."


def why_no_answer(result: HostResult, timeout: float) -> str | None:
    """Why a host's probe (GPU inventory, stacks) gave no answer, in one line; None when it exited 0.
    "unreachable: <ssh's message>", "timeout: no answer within N s", "exit N: <stderr's last line>",
    or, with no exit status, why as its transport said it (fanout/transports.no_answer)."""
    if result.status == OK:
        return None
    if result.status == UNREACHABLE:
        return "unreachable: %s" % (last_line(result.stderr) or "ssh could not connect")
    if result.status in (TIMEOUT, INTERRUPTED):  # INTERRUPTED: still running at our deadline
        return "timeout: no answer within %g s" % timeout
    if result.exit_code is None:   # failed before any exit status: its transport, or its engine, says why
        return last_line(result.stderr) or "no answer"
    return "exit %s: %s" % (result.exit_code, last_line(result.stderr) or "no message")


class Results:
    """What ``-o NAME`` stores: every record of one run, in order, and its summary as shown.

    ``name[key]`` is one record, by rank (``%%mpirun``) or host name (``%allrun``); ``ok``: every
    one succeeded; ``failed``: the keys of those that did not; ``stdout`` / ``stderr``:
    ``{key: text}``; ``text`` / ``html``: the grouped summary.
    """

    noun = "records"

    def __init__(self, results, text: str = "", html: str = ""):
        self.results = list(results)
        self.text, self.html = text, html
        self._by_key = {r.key: r for r in self.results}

    def __getitem__(self, key):
        return self._by_key[key]

    def __iter__(self):
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def ok(self) -> bool:
        return all(r.status == OK for r in self.results)

    @property
    def failed(self) -> list:
        return [r.key for r in self.results if r.status != OK]

    @property
    def stdout(self) -> dict:
        return {r.key: r.stdout for r in self.results}

    @property
    def stderr(self) -> dict:
        return {r.key: r.stderr for r in self.results}

    def _repr_html_(self) -> str | None:
        return self.html or None

    def _details(self) -> str:
        return ""

    def __repr__(self) -> str:
        counts: dict = {}
        for result in self.results:
            counts[result.status] = counts.get(result.status, 0) + 1
        summary = ", ".join(f"{n} {status}" for status, n in counts.items())
        return f"<{type(self).__name__} {len(self)} {self.noun}: {summary}{self._details()}>"


class MpirunResult(Results):
    """``%%mpirun -o NAME``: one RankResult per rank; ``log_dir`` holds every byte they wrote."""

    noun = "ranks"

    def __init__(self, results, log_dir: str, summary_written=None, text: str = "", html: str = ""):
        super().__init__(results, text, html)
        self.log_dir = log_dir
        self.summary_written = summary_written  # a Future: summary.json is written in the background

    def __getstate__(self) -> dict:
        # A result pickles (kept to a file, sent to another process); the write it waits on stays.
        return {**self.__dict__, "summary_written": None}

    def _details(self) -> str:
        return f"; logs in {self.log_dir}"


class AllrunResult(Results):
    """``%allrun -o NAME``: one HostResult per host, and the exit status ``allrun`` would give."""

    noun = "hosts"

    def __init__(self, results, text: str = "", html: str = "", exit_status: int = 0):
        super().__init__(results, text, html)
        self.exit_status = exit_status

    def _details(self) -> str:
        return f"; exit status {self.exit_status}"
