"""The client's half of engine/quiet: a reply that says its request published nothing completes
that request's output at once (no 'idle' will come for it); the rank's run time is kept in the
request's metadata under ``SECONDS_KEY`` (ipyparallel's own extraction keeps known keys only)."""
from __future__ import annotations

from ..engine.quiet import QUIET_KEY, SECONDS_KEY
from .ipp_private import REPLY_KINDS, reply_hooks


def complete_quiet_outputs(client) -> None:
    """Wrap the client's reply handlers (they run on its IO thread) once; a client without them
    is one MlpMagicError (world/ipp_private.reply_hooks)."""
    handlers, outputs = reply_hooks(client)
    for kind in REPLY_KINDS:
        handle = handlers[kind]
        if getattr(handle, "_mlp_quiet", False):
            continue

        def handle_then_complete(msg, handle=handle):
            handle(msg)
            msg_id, extra = msg["parent_header"]["msg_id"], msg["metadata"]
            if SECONDS_KEY in extra and msg_id in client.metadata:
                # ipyparallel's Metadata refuses unknown keys through its own __setitem__
                dict.__setitem__(client.metadata[msg_id], SECONDS_KEY, extra[SECONDS_KEY])
            if extra.get(QUIET_KEY):
                future = outputs.get(msg_id)
                if future is not None and not future.done():
                    future.set_result(None)

        handle_then_complete._mlp_quiet = True
        handlers[kind] = handle_then_complete
