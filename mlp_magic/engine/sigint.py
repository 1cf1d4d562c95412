"""SIGINT raises KeyboardInterrupt in a cell's own code, never in the rank's handling of it.

ipykernel installs Python's default SIGINT handler for the whole of a request, and the client may
signal a rank twice (a second round for ranks that seem not to have heard the first). On a busy
host the first KeyboardInterrupt's traceback takes a while to build (IPython formats it, importing
what that needs the first time); a second SIGINT landing there raises inside IPython's own
traceback code, and the rank's output turns into a traceback of that. So from the moment a cell's
traceback starts to be shown, and after the cell, a SIGINT does nothing; the next request is
interruptible again (ipykernel's pre-handler hook installs the default handler for each one).
A cell that catches KeyboardInterrupt and carries on stays interruptible: only showing a
traceback, or the end of the cell, disarms.
"""
from __future__ import annotations

import functools
import signal
import threading

_INSTALLED = "_mlp_sigint_gate"


def _ignore(signum, frame) -> None:
    """A Python-level no-op (not SIG_IGN, which processes the cell starts would inherit)."""


def disarm(*_args) -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _ignore)


def install_sigint_gate(shell) -> None:
    """Disarm SIGINT as the shell starts showing a traceback and when a cell ends (idempotent).
    Call before other post_run_cell hooks are registered, so they run disarmed as well."""
    if getattr(shell, _INSTALLED, False):
        return
    show = shell.showtraceback

    @functools.wraps(show)
    def showtraceback(*args, **kwargs):
        disarm()
        return show(*args, **kwargs)

    shell.showtraceback = showtraceback
    shell.events.register("post_run_cell", disarm)
    setattr(shell, _INSTALLED, True)
