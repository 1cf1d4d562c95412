"""Every use of jupyter_server's private API, each guarded, with its fallback (contract test:
tests/unit/panel/test_jupyter_server_private.py). pyproject's ``jupyter_server<3`` bound covers them.

- ``JupyterHandler.prepare(_redirect_to_login=False)`` (newer 2.x): the dashboard page answers
  403 itself instead of redirecting to the login page. Without the keyword (2.4), prepare never
  redirects: plain ``prepare()``.
- ``handler._token_authenticated``: the page writes the token into its config only when the
  request came with one. Without it: no token written (the page then needs the login cookie).
- ``ServerApp._signal_stop``: ``mlp-magic dashboard`` stops on SIGINT/SIGTERM without the
  "shut down? (y/n)" prompt. Without it: the IO loop is stopped from the signal.
"""
from __future__ import annotations

import inspect

from jupyter_server.base.handlers import JupyterHandler

PREPARE_TAKES_REDIRECT = "_redirect_to_login" in inspect.signature(JupyterHandler.prepare).parameters


async def prepare_without_login_redirect(prepare) -> None:
    """``prepare``: the handler's ``super().prepare``."""
    if PREPARE_TAKES_REDIRECT:
        await prepare(_redirect_to_login=False)
    else:
        await prepare()


def token_authenticated(handler) -> bool:
    return bool(getattr(handler, "_token_authenticated", False))


def signal_stopper(server):
    """What SIGINT/SIGTERM call to stop ``server`` cleanly."""
    stop = getattr(server, "_signal_stop", None)
    if stop is not None:
        return stop

    def stop_loop(sig, frame) -> None:
        server.io_loop.add_callback_from_signal(server.io_loop.stop)
    return stop_loop
