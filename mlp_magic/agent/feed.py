"""The agent's sampling loop: one GPU sample a second, kept in the history, sent to subscribers.

Sampling runs whether anyone listens or not, so a panel opened during a hang sees the ten
minutes before it. Each subscriber has its own bounded queue of encoded lines: a slow one
loses its oldest samples, never slows the loop or the others (its socket's send timeout ends
it if it stops reading altogether).
"""
from __future__ import annotations

import collections
import socket
import threading

from mlp_magic.gpu.pure.history import DEFAULT_LENGTH, GpuHistory
from mlp_magic.agent.protocol import encode

QUEUE_LINES = 30   # samples a subscriber may fall behind before it loses the oldest


class Subscriber:
    """One subscriber's lines to send, oldest first; ``next_line`` blocks until one comes."""

    def __init__(self, first: list):
        self._lines = collections.deque(first, maxlen=QUEUE_LINES + len(first))
        self._ready = threading.Condition()
        self.closed = False

    def push(self, line: bytes) -> None:
        with self._ready:
            self._lines.append(line)   # a full deque drops its oldest line
            self._ready.notify()

    def close(self) -> None:
        with self._ready:
            self.closed = True
            self._ready.notify()

    def next_line(self, timeout: float) -> bytes | None:
        """The next line, or None when closed or nothing came within ``timeout`` seconds."""
        with self._ready:
            if not self._lines and not self.closed:
                self._ready.wait(timeout)
            return self._lines.popleft() if self._lines and not self.closed else None


class Feed:
    """The sampler's readings, as a history and as a stream of ``{"type": "sample"}`` lines.

    The sampler is opened by ``open()``, in the sampling thread (``run``): NVML's first call
    can hang on a GPU in trouble, exactly when the agent's other ops are wanted, so nothing
    else waits for it. Subscribers that come earlier get the static facts once they are known.
    """

    def __init__(self, open_sampler, host: str | None = None, history_length: int = DEFAULT_LENGTH):
        self._open_sampler, self._length = open_sampler, history_length
        self.host = host or socket.gethostname()
        self.sampler = None
        self.static: dict | None = None
        self.history: GpuHistory | None = None
        self._subscribers: set = set()
        self._lock = threading.Lock()

    def _first_lines(self) -> list:
        return [encode(self.static), encode({"type": "history", **self.history.to_json()})]

    def open(self) -> None:
        """Open the sampler (one that cannot be opened: its error as the static facts' error)."""
        try:
            sampler = self._open_sampler()
            static = sampler.static()
        except Exception as error:   # a replay file that cannot be read, a broken binding
            sampler, static = None, {"source": "none", "error": str(error) or type(error).__name__,
                                     "driver": None, "gpus": []}
        with self._lock:
            self.sampler = sampler
            self.static = {"type": "static", "host": self.host, **static}
            self.history = GpuHistory(len(static["gpus"]), self._length)
            for subscriber in self._subscribers:
                for line in self._first_lines():
                    subscriber.push(line)

    def subscribe(self) -> Subscriber:
        """A subscriber whose first lines are the static facts and the history so far."""
        with self._lock:
            subscriber = Subscriber(self._first_lines() if self.static is not None else [])
            self._subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.discard(subscriber)
        subscriber.close()

    def tick(self) -> dict | None:
        """Take one sample, keep it, send it; the sample (None without a sampler)."""
        if self.sampler is None:
            return None
        sample = self.sampler.sample()
        line = encode({"type": "sample", **sample})
        with self._lock:
            self.history.append(sample["t"], sample["gpus"])
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            subscriber.push(line)
        return sample

    def run(self, stop: threading.Event, tick_s: float = 1.0) -> None:
        """Open the sampler, then sample every ``tick_s`` until ``stop`` is set."""
        self.open()
        while not stop.is_set():
            try:
                self.tick()
                if self.sampler is None:
                    raise RuntimeError("no sampler")
                self.sampler.wait_tick(tick_s)
            except Exception:   # a reading that cannot be sent, a failing wait: keep the beat
                stop.wait(tick_s)
