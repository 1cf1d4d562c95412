"""The client's half of engine/quiet: a reply that says its request published nothing completes
that request's output at once (no 'idle' will come for it); the rank's run time is kept in the
request's metadata under ``SECONDS_KEY`` (ipyparallel's own extraction keeps known keys only).

Where the client keeps its reply handlers elsewhere (client/ipp_private.reply_hooks), nothing is
wrapped: the World then has its engines publish plain ipykernel messages instead (world/guards).
"""
from __future__ import annotations

from concurrent.futures import InvalidStateError
from datetime import datetime

from mlp_magic.engine.quiet import QUIET_KEY, SECONDS_KEY
from mlp_magic.client import ipp_private
from mlp_magic.client.ipp_private import REPLY_KINDS, keep_in_metadata


def complete_quiet_outputs(client) -> bool:
    """Wrap the client's reply handlers (they run on its IO thread) once; False, changing
    nothing, where the client has none we know."""
    hooks = ipp_private.reply_hooks(client)
    if hooks is None:
        return False
    handlers, outputs = hooks
    for kind in REPLY_KINDS:
        handle = handlers[kind]
        if getattr(handle, "_mlp_quiet", False):
            continue

        def handle_then_complete(msg, handle=handle):
            msg_id, extra = msg["parent_header"]["msg_id"], msg["metadata"]
            # before ipyparallel's handler: it completes the request, and the waiting cell
            # reads the run time at once (after it, a cell's footer sometimes said "-")
            if SECONDS_KEY in extra:
                keep_in_metadata(client, msg_id, SECONDS_KEY, extra[SECONDS_KEY])
            try:
                handle(msg)
            except InvalidStateError:
                # A second reply to a request already answered (a rank that was interrupted and
                # came free late, by --unblock): the first one stands; ipyparallel's handler
                # would raise on its IO thread, and print a traceback for each.
                return
            if extra.get(QUIET_KEY):
                future = outputs.get(msg_id)
                if future is not None and not future.done():
                    future.set_result(None)

        handle_then_complete._mlp_quiet = True
        handlers[kind] = handle_then_complete
    return True


def run_seconds(metadata) -> float | None:
    """How long a request ran on its rank: the rank's own count (``SECONDS_KEY``), else
    ipyparallel's 'started' and 'completed' dates (engines publishing plain messages)."""
    seconds = metadata.get(SECONDS_KEY)
    if seconds is not None:
        return seconds
    try:
        started, completed = (_as_date(metadata.get(key)) for key in ("started", "completed"))
        return max(0.0, (completed - started).total_seconds())
    except (TypeError, ValueError):
        return None


def _as_date(value) -> datetime:
    """ipyparallel parses 'started' into a datetime and leaves 'completed' an ISO text."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else value
