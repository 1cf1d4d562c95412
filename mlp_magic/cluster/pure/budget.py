"""How many bytes of patches a live view may be sent, and when the next may go. Pure: times given.

A token bucket: ``bytes_per_s`` come in every second, up to ``burst`` kept. A patch goes when the
bucket is not empty, and takes its size from it (it may go below zero: one large patch is never
held back whole, the next ones wait until the bucket is refilled). So over any stretch of time a
view gets at most ``burst + bytes_per_s x seconds`` bytes of patches, a lone change goes at once,
and a storm of changes (512 ranks flipping four times a second) is coalesced: the server diffs
what changed meanwhile when the bucket allows, one patch for many changes.
"""
from __future__ import annotations


class SendBudget:
    def __init__(self, bytes_per_s: float, burst: float, now: float):
        if bytes_per_s <= 0 or burst <= 0:
            raise ValueError("a send budget needs a positive rate and burst")
        self.bytes_per_s, self.burst = float(bytes_per_s), float(burst)
        self._tokens, self._at = float(burst), now

    def _refill(self, now: float) -> None:
        if now > self._at:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.bytes_per_s)
            self._at = now

    def wait(self, now: float) -> float:
        """Seconds until a patch may go (0: now)."""
        self._refill(now)
        return 0.0 if self._tokens > 0 else (1e-9 - self._tokens) / self.bytes_per_s

    def spent(self, now: float, size: int) -> None:
        """A patch of ``size`` bytes went at ``now``."""
        self._refill(now)
        self._tokens -= size
