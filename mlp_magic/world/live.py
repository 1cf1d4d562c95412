"""A World's live record: its ranks' states, kept by the rank-waiting loop, published for the panel.

The callbacks of ``client/waiting`` (on ipyparallel's IO thread) and the kernel's own thread
change the rank states here, under one lock, and mark the record changed; a publisher thread of
its own writes the World's file (``world/published``) at most every ``STATE_EVERY_S`` after a
change of state, or ``OUTPUT_EVERY_S`` when only output times moved, so the server's panel sees
a change within a second while a cell runs, and a burst of changes (512 ranks finishing) is one
write. Writing off the kernel's thread keeps it out of the cell's way.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from mlp_magic.world.pure.rank_states import RankStates, iso, summary_line

STATE_EVERY_S = 0.2     # a change of state reaches the file this soon, at most this often
OUTPUT_EVERY_S = 1.0    # only last-output times moved: this often is enough (ages are in seconds)
FIRST_LINE_CHARS = 120


def first_line(code: str) -> str:
    """The cell's first line worth showing: not blank, not a comment, not a magic's own line."""
    for line in code.splitlines():
        text = line.strip()
        if text and not text.startswith(("#", "%%")):
            return text if len(text) <= FIRST_LINE_CHARS else text[:FIRST_LINE_CHARS - 1] + "…"
    return ""


class LiveWorld:
    """The rank states of one World and its running cell; ``publish`` writes the World's record."""

    def __init__(self, hosts: Sequence[str], publish: Callable[[], None], clock=time.time):
        self._clock = clock
        self._lock = threading.Lock()
        self.states = RankStates(hosts, clock())
        self.cell: dict | None = None
        self.log_dir: str | None = None   # the running or last cell's (a rank's log tail)
        self.profile: dict | None = None   # the last %%mpirun --profile's report (``profiled``)
        self._publish = publish
        self._changed = threading.Event()
        self._closed = False
        self._written = (-1, -1)   # (state version, output version) last written
        self._writing = threading.Lock()   # one write at a time: the publisher's or a flush
        self._thread = threading.Thread(target=self._publisher, name="mlp-world-live", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ changes
    def _change(self, method: str, *args) -> None:
        with self._lock:
            getattr(self.states, method)(*args, self._clock())
        self._changed.set()

    def ready(self) -> None:
        self._change("ready")

    def sent(self, ranks: Sequence[int]) -> None:
        self._change("sent", ranks)

    def ended(self, rank: int) -> None:
        self._change("ended", rank)

    def paused(self, rank: int) -> None:
        self._change("paused", rank)

    def resumed(self, ranks: Sequence[int]) -> None:
        self._change("resumed", ranks)

    def wrote(self, rank: int) -> None:
        self._change("wrote", rank)

    def died(self, ranks: Sequence[int]) -> None:
        self._change("died", ranks)

    def all_died(self) -> None:
        self._change("all_died")

    def revived(self, ranks: Sequence[int]) -> None:
        self._change("revived", ranks)

    def touch(self) -> None:
        """Something else of the record changed (the GPU inventory): write it again."""
        with self._lock:
            self.states.version += 1
        self._changed.set()

    def cell_started(self, code: str, ranks: Sequence[int], log_dir: str) -> None:
        with self._lock:
            self.cell = {"first_line": first_line(code), "started": iso(self._clock()),
                         "ranks": list(ranks), "log_dir": log_dir}
            self.log_dir = log_dir
            self.states.version += 1
        self._changed.set()

    def cell_ended(self, log_dir: str) -> None:
        """The cell logging to ``log_dir`` is over (a later cell's record is left alone)."""
        with self._lock:
            if self.cell is None or self.cell["log_dir"] != log_dir:
                return
            self.cell = None
            self.states.version += 1
        self.flush()

    def profiled(self, lines: list, straggler: int | None, folder: str) -> None:
        """A profiled cell's report, for the panel: its lines, the straggler named, its samples."""
        with self._lock:
            self.profile = {"at": iso(self._clock()), "lines": list(lines), "straggler": straggler,
                            "folder": folder}
            self.states.version += 1
        self.flush()

    def flush(self) -> None:
        """Write the record now if it changed: when a cell returns, its record says so already
        (``mlp-magic status`` or a script reading it right after the cell sees idle ranks)."""
        with self._writing:
            if self._closed or self._versions() == self._written:
                return
            self._written = self._versions()
            self._write()

    def _write(self) -> None:
        try:
            self._publish()
        except Exception:  # noqa: BLE001 - the panel is a nicety: never stop the World over it
            pass

    # ------------------------------------------------------------------ reading
    def record(self) -> dict:
        """{"cell", "log_dir", "ranks": [...], "profile"} as the World's record holds them."""
        with self._lock:
            return {"cell": dict(self.cell) if self.cell else None, "log_dir": self.log_dir,
                    "ranks": self.states.to_json(), "profile": self.profile}

    def summary(self) -> str:
        """ "4 ranks: 4 paused 12 s": the states counted (world/pure/rank_states.summary_line)."""
        with self._lock:
            return summary_line(self.states.rows, self._clock())

    # ------------------------------------------------------------------ publishing
    def _versions(self) -> tuple:
        return self.states.version, self.states.output_version

    def _publisher(self) -> None:
        written_at = float("-inf")
        while True:
            self._changed.wait()
            self._changed.clear()
            if self._closed:
                return
            if self._versions() == self._written:
                continue
            # Only output times moved: hold until OUTPUT_EVERY_S after the last write, unless a
            # state changes meanwhile (the counters are read afresh: no wake-up is lost).
            while not self._closed and self._versions()[0] == self._written[0]:
                left = written_at + OUTPUT_EVERY_S - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
                self._changed.clear()
            with self._writing:
                if self._versions() != self._written:
                    self._written = self._versions()
                    self._write()
            written_at = time.monotonic()
            time.sleep(STATE_EVERY_S)   # coalesce: a burst of changes is one write

    def close(self) -> None:
        """No more writes (the World stops; its file is withdrawn)."""
        self._closed = True
        self._changed.set()
        self._thread.join(2.0)
