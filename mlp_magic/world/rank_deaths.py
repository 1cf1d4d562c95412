"""A rank's death in a World that survives it (ULFM's recovery, world/start/mpi): the launcher
lives on and says which rank failed in its log; this module hears it and tells the World.

The launcher's line is the one word on every host's ranks (a rank on another host is not ours
to wait on); nothing announces a new line in a file (no inotify in the standard library), so one
thread reads what was added to the log every ``LOOK_EVERY_S``: a stat, and a read when it grew.
"""
from __future__ import annotations

import os
import threading

from mlp_magic.world.pure.deaths import ulfm_failures

LOOK_EVERY_S = 0.1
CARRY_BYTES = 4096   # a line cut by the last read is read whole the next time


class RankDeathWatch:
    """Calls ``on_deaths({rank: how})`` from its own thread for ranks the launcher's log at
    ``log_path`` names as failed, each process once, until ``close()``. The World's job is 1;
    ``spawned`` ({(job, index): rank}, the World's) names the ranks respawned since."""

    def __init__(self, log_path: str, on_deaths, spawned: dict | None = None):
        self.log_path, self.on_deaths = log_path, on_deaths
        self.spawned = {} if spawned is None else spawned
        self._told: set = set()
        self._offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mlp-rank-deaths", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(2.0)

    def look(self) -> None:
        """Read what the log gained; tell the World of ranks newly named."""
        try:
            size = os.path.getsize(self.log_path)
            if size <= self._offset:
                return
            start = max(0, self._offset - CARRY_BYTES)
            with open(self.log_path, "rb") as handle:
                handle.seek(start)
                text = handle.read(size - start).decode(errors="replace")
        except OSError:
            return
        self._offset = size
        failed = {key: how for key, how in ulfm_failures(text).items() if key not in self._told}
        self._told.update(failed)
        new = {rank: how for (job, index), how in failed.items()
               if (rank := index if job == 1 else self.spawned.get((job, index))) is not None}
        if new:
            self.on_deaths(new)

    def _run(self) -> None:
        while not self._stop.wait(LOOK_EVERY_S):
            self.look()
