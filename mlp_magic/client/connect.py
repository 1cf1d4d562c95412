"""The kernel's client of a World's controller, connected or refused in one line.

ipyparallel's Client asks the controller for its addresses and raises a bare TimeoutError when no
answer comes. The controller writes its connection file before it starts answering, so a loaded
machine can leave that gap long (seen once in CI: over 30 s on two busy cores); the answer is
waited for as long as the controller lives, up to the World's whole start budget, and a failure
names the controller's end or its log.
"""
from __future__ import annotations

import time

from mlp_magic.errors import MlpMagicError

ATTEMPT_S = 5.0   # one request's wait; the controller's death is looked at between attempts


def connect(info, controller, timeout: float):
    """A connected ``ipyparallel.Client`` for ``info`` (a connection file or dict); ``controller``
    (``running()``, ``failure()``, ``log_path``) is watched while it does not answer."""
    import ipyparallel

    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            return ipyparallel.Client(info, timeout=max(min(ATTEMPT_S, left), 0.1))
        except TimeoutError:
            if not controller.running():
                raise MlpMagicError(controller.failure()) from None
            if time.monotonic() >= deadline:
                raise MlpMagicError(f"{controller.name} did not answer the kernel within "
                                    f"{timeout:.0f} s; log: {controller.log_path}") from None
