"""Wall-clock bounds and waits for the tests that run real processes (one place for both).

A test's bound on time guards against a hang or a regression of an order of magnitude, never
measures speed: ``benchmarks/`` does that, in one command, against a peer. CI runs on a noisy,
shared 2-core machine, where a step that usually takes 0.5 s can take several; a bound is
therefore ``hang_bound(usual)``: five times the usual time, and never under 10 s.
"""
from __future__ import annotations

import time

from mlp_magic.machine.deadline import until

HANG_FLOOR_S = 10.0   # no bound on a shared 2-core machine is tighter than this
HANG_FACTOR = 5.0     # an order of magnitude above the usual, before the floor


def hang_bound(usual_s: float) -> float:
    """The most a step that usually takes ``usual_s`` may take before the test calls it hung."""
    return max(HANG_FLOOR_S, HANG_FACTOR * usual_s)


def wait_until(predicate, seconds: float = HANG_FLOOR_S, interval: float = 0.05) -> bool:
    """Ask ``predicate`` until it is true (True) or ``seconds`` have passed (its last answer),
    on machine/deadline.until's pace (pauses doubling up to ``interval``).

    The synchronisation of a test: never a bare sleep before an assert."""
    return bool(until(predicate, time.monotonic() + seconds, longest_s=interval))
