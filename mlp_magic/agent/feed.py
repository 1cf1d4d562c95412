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

from ..core.gpu_history import DEFAULT_LENGTH, GpuHistory
from .protocol import encode

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
    """The sampler's readings, as a history and as a stream of ``{"type": "sample"}`` lines."""

    def __init__(self, sampler, host: str | None = None, history_length: int = DEFAULT_LENGTH):
        self.sampler = sampler
        static = sampler.static()
        self.static = {"type": "static", "host": host or socket.gethostname(), **static}
        self.history = GpuHistory(len(static["gpus"]), history_length)
        self._subscribers: set = set()
        self._lock = threading.Lock()

    def subscribe(self) -> Subscriber:
        """A subscriber whose first lines are the static facts and the history so far."""
        with self._lock:
            first = [encode(self.static), encode({"type": "history", **self.history.to_json()})]
            subscriber = Subscriber(first)
            self._subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.discard(subscriber)
        subscriber.close()

    def tick(self) -> dict:
        """Take one sample, keep it, send it; the sample."""
        sample = self.sampler.sample()
        line = encode({"type": "sample", **sample})
        with self._lock:
            self.history.append(sample["t"], sample["gpus"])
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            subscriber.push(line)
        return sample

    def run(self, stop: threading.Event, tick_s: float = 1.0, still_wanted=lambda: True) -> None:
        """Sample every ``tick_s`` until ``stop`` is set or ``still_wanted()`` says no."""
        while not stop.is_set():
            try:
                self.tick()
            except Exception:   # a reading that cannot be sent: skip the tick, keep sampling
                pass
            if not still_wanted():
                stop.set()
                return
            self.sampler.wait_tick(tick_s)
