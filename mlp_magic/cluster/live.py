"""The live cluster model the server keeps: one document, its changes pushed to every open panel.

One ``LiveCluster`` per server (and one in ``mlp-magic top``). It holds the cluster document
(``ClusterState.to_json()``, the one ``mlp-magic status --json`` prints) built from two kinds of
input, each taken as often as it changes:
- the published Worlds (their ranks' states, from each kernel's rank-waiting loop): the folder
  is watched (cluster/dir_watch) and read again the moment a kernel writes; a World whose kernel
  is gone drops out within ``LIVENESS_EVERY_S``;
- the slow part (topology, reachability, this machine's GPU inventory): collected in a worker
  thread every ``SLOW_EVERY_S`` while someone watches, or on demand (``refresh``);
- the last ``mlp-magic doctor`` report (the hosts' health), in the same folder: read again the
  moment a run writes it, so that the health column follows a run at once.
Each new document is compared with the last sent (cluster/pure/delta) and only the operations are
sent, encoded once for every subscriber: ``{"type": "patch", "seq", "server_time", "ops"}``; a new
subscriber first gets ``{"type": "snapshot", ...}``. Patches keep within ``PATCH_BYTES_PER_S``
(cluster/pure/budget): a lone change goes at once, a storm of them (512 ranks flipping four times a
second) is sent as one patch when the budget allows, so that a view costs at most 50 KB/s with
the GPUs' samples. Slow subscribers are the transport's
business (panel/live_socket).
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import datetime, timezone
from collections.abc import Callable

from mlp_magic.cluster.pure.budget import SendBudget
from mlp_magic.cluster.pure.delta import diff
from mlp_magic.doctor.pure.report import REPORT_NAME
from mlp_magic.cluster.collect import CollectOptions, Parts, StateCollector, read_health
from mlp_magic.cluster.dir_watch import DirWatch
from mlp_magic.cluster.gpu_feed import GpuFeed
from mlp_magic.machine.process_alive import alive

SLOW_EVERY_S = 30.0       # topology and reachability, while someone watches
LIVENESS_EVERY_S = 5.0    # kernels checked for life (a dead one's World leaves the document)
REFRESH_AT_MOST_EVERY_S = 2.0
GPUS_EVERY_S = 1.0        # one "gpus" message for all hosts, when new samples came
# Patches' bytes a second to every view, and the most kept for a burst. The GPUs' samples of 64
# hosts of 8 GPUs take about 20 KB/s beside them: 50 KB/s a view in all.
PATCH_BYTES_PER_S = 25_000
PATCH_BURST_BYTES = 25_000


def _same_process(entry) -> bool:
    """Whether a World's process (the record's {"pid", "create_time"}) still runs; one with no
    start time had ended when the record was written (world/pure/record)."""
    return entry.get("create_time") is not None and alive((entry.get("pid"), entry["create_time"]))


def as_seen(world: dict) -> dict:
    """The record, or, when one of the World's own processes is gone while its kernel cannot say
    so (stuck in a cell), the record of a stopped World whose ranks are dead."""
    processes = world.get("processes") or []
    if world.get("state") != "running" or all(_same_process(p) for p in processes):
        return world
    ranks = [dict(row, state="dead") if isinstance(row, dict) else row for row in world.get("ranks") or []]
    return dict(world, state="stopped", ranks=ranks)


def server_time() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class LiveCluster:
    def __init__(self, options: CollectOptions, state_dir: str, read_worlds: Callable[[str], list]):
        self.collector = StateCollector(options)
        self.state_dir = state_dir
        self._read_worlds = read_worlds
        self.worlds: list[dict] = []
        self.parts: Parts | None = None
        self.doc: dict | None = None
        self.gpu_feed = GpuFeed(self._rebuild, self._send_history)   # the agents' readings, while watched
        self._gpus_sent = 0
        self.seq = 0
        self._subscribers: dict[int, Callable[[str], None]] = {}
        self._next_id = 0
        self._watch = DirWatch(state_dir, self._worlds_changed)
        self._tasks: list[asyncio.Task] = []
        self._slow: asyncio.Future | None = None
        self._slow_at = float("-inf")
        self._health_stamp = None   # the doctor report's file as last read
        self.rebuilds = 0    # documents built (tests and benchmarks)
        self.patches = 0     # patches sent (tests and benchmarks)
        self._built: dict | None = None   # the newest document, not yet sent
        self._stale = False   # the inputs changed while nobody watched: ``current`` builds it
        self._budget = SendBudget(PATCH_BYTES_PER_S, PATCH_BURST_BYTES, time.monotonic())
        self._flush_later: asyncio.TimerHandle | None = None
        self.slow_collects = 0   # slow parts taken
        self._started: asyncio.Future | None = None

    async def ensure_started(self) -> None:
        """Start once, on the running event loop (every caller waits for the first document)."""
        if self._started is None:
            self._started = asyncio.ensure_future(self.start())
        await asyncio.shield(self._started)

    # ------------------------------------------------------------------ life
    async def start(self) -> None:
        self._watch.start()
        self._reread_worlds()
        await self.refresh()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._every(LIVENESS_EVERY_S, self._reread_worlds)),
                       loop.create_task(self._every(SLOW_EVERY_S, self._slow_if_watched)),
                       loop.create_task(self._every(GPUS_EVERY_S, self._send_gpus))]

    def stop(self) -> None:
        self._watch.stop()
        self.gpu_feed.stop()
        if self._flush_later is not None:
            self._flush_later.cancel()
        for task in self._tasks:
            task.cancel()

    @staticmethod
    async def _every(seconds: float, action) -> None:
        while True:
            await asyncio.sleep(seconds)
            result = action()
            if asyncio.iscoroutine(result):
                await result

    # ------------------------------------------------------------------ inputs
    def _worlds_changed(self) -> None:
        """A file of the folder changed: a World's record, or the doctor's last report."""
        health = self._reread_health()
        if not self._reread_worlds() and health:
            self._rebuild()

    def _reread_worlds(self) -> bool:
        """Whether the Worlds changed (the document is then rebuilt)."""
        try:
            worlds = self._read_worlds(self.state_dir)
        except (OSError, ValueError):
            return False
        worlds.sort(key=lambda w: (str(w.get("host")), w.get("pid") or 0))
        worlds = [as_seen(world) for world in worlds]
        if worlds == self.worlds:
            return False
        self.worlds = worlds
        self._follow_agents()
        self._rebuild()
        return True

    def _reread_health(self) -> bool:
        """The doctor's report read again when its file is not the one last read (a stat
        otherwise); whether the hosts' health changed. Not rebuilt here."""
        try:
            found = os.stat(os.path.join(self.state_dir, REPORT_NAME))
            stamp = (found.st_ino, found.st_mtime_ns, found.st_size)
        except OSError:
            stamp = None
        if self.parts is None or stamp == self._health_stamp:
            return False
        self._health_stamp = stamp
        health = read_health(self.state_dir)
        if health == self.parts.health:
            return False
        self.parts.health = health
        return True

    def _follow_agents(self) -> None:
        """The Worlds' agents are followed while someone watches (a running loop is needed)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self.gpu_feed.follow(self.worlds, watched=bool(self._subscribers))

    @property
    def gpu_latest(self) -> dict[str, list]:
        """{host: the newest reading of each GPU} (``mlp-magic top``)."""
        return {host: rows for host, (_, rows) in self.gpu_feed.latest.items()}

    async def _slow_if_watched(self) -> None:
        if self._subscribers:
            await self.refresh()

    async def refresh(self, at_most_every: float = 0.0) -> dict:
        """Take the slow part again (shared with a collect already under way); the document."""
        if self._slow is None and time.monotonic() - self._slow_at >= at_most_every:
            self._slow = asyncio.ensure_future(self._collect_slow())
        if self._slow is not None:
            await asyncio.shield(self._slow)
        return self.current

    @property
    def current(self) -> dict | None:
        """The newest document (a patch of it may be waiting for the views' budget)."""
        self._catch_up()
        return self._built if self._built is not None else self.doc

    def _catch_up(self) -> None:
        """The document made new where it changed while nobody watched."""
        if self._stale:
            self._stale = False
            self.doc, self._built, self.seq = self._document(), None, self.seq + 1

    async def _collect_slow(self) -> None:
        self.slow_collects += 1
        try:
            self.parts = await asyncio.get_running_loop().run_in_executor(None, self.collector.gather)
            self._slow_at = time.monotonic()
            self._health_stamp = None   # a run may have ended while the worker read the report
            self._reread_health()
            self._rebuild()
        finally:
            self._slow = None

    # ------------------------------------------------------------------ the document
    def world(self, world_id: str) -> dict | None:
        """The published record of a World (its private part included), or None."""
        return next((w for w in self.worlds if w.get("id") == world_id), None)

    def _document(self) -> dict:
        doc = self.collector.state_with(self.worlds, self.parts).to_json()
        for host in doc.get("hosts") or []:
            host["live_gpus"] = self.gpu_feed.hosts.get(host.get("name"))
        self.rebuilds += 1
        return doc

    def _rebuild(self) -> None:
        if self.parts is None:
            return
        if self.doc is not None and not self._subscribers:
            self._stale = True   # nobody watches: built when asked (a GET, a new view), not 4x a second
            return
        doc = self._document()
        if self.doc is None:   # the first document: whoever subscribed meanwhile gets it whole
            self.doc, self.seq = doc, 1
            self._send(self._snapshot())
            return
        self._built = doc
        self._send_patch()

    def _send_patch(self) -> None:
        """What changed since the last patch, now if the budget allows, else when it will."""
        self._flush_later = None
        if self._built is None:
            return
        wait = self._budget.wait(time.monotonic())
        if wait > 0:
            if self._flush_later is None:
                self._flush_later = asyncio.get_running_loop().call_later(wait, self._send_patch)
            return
        doc, self._built = self._built, None
        ops = diff(self.doc, doc)
        if not ops:
            return
        self.doc, self.seq = doc, self.seq + 1
        self.patches += 1
        size = self._send({"type": "patch", "seq": self.seq, "server_time": server_time(), "ops": ops})
        if size:
            self._budget.spent(time.monotonic(), size)

    # ------------------------------------------------------------------ subscribers
    def subscribe(self, send: Callable[[str], None]) -> Callable[[], None]:
        """``send(text)`` gets the snapshot now, then every message; returns the unsubscribe."""
        key, self._next_id = self._next_id, self._next_id + 1
        self._subscribers[key] = send
        self._catch_up()
        if self.doc is not None:
            send(json.dumps(self._snapshot()))
            if self.gpu_feed.histories:   # the sparklines' last ten minutes, to this one only
                send(json.dumps(self._history(None)))
        self._follow_agents()

        def unsubscribe() -> None:
            self._subscribers.pop(key, None)
            self._follow_agents()
        return unsubscribe

    def _history(self, host: str | None) -> dict:
        """A "gpu_history" message (every host's, or ``host``'s); numbered as the document it
        follows, which the panel takes as outside the sequence."""
        return {"type": "gpu_history", "seq": self.seq, "server_time": server_time(),
                **self.gpu_feed.history_message(time.time(), only=host)}

    def _send_history(self, host: str) -> None:
        """An agent's history just came (we began to follow it): to every panel, which has none."""
        self._send(self._history(host))

    def _snapshot(self) -> dict:
        return {"type": "snapshot", "seq": self.seq, "server_time": server_time(), "doc": self.doc}

    def _send_gpus(self) -> None:
        """The newest samples of every host, unnumbered (they change no document), when new."""
        if self.gpu_feed.sample_count == self._gpus_sent:
            return
        self._gpus_sent = self.gpu_feed.sample_count
        samples = self.gpu_feed.samples_message()
        if samples is not None:
            self._send({"type": "gpus", "server_time": server_time(), **samples})

    @property
    def watchers(self) -> int:
        return len(self._subscribers)

    def _send(self, message: dict) -> int:
        """The message to every subscriber; its size in bytes (0: nobody listens)."""
        if not self._subscribers:
            return 0
        text = json.dumps(message)   # encoded once for every subscriber
        for send in list(self._subscribers.values()):
            send(text)
        return len(text)
