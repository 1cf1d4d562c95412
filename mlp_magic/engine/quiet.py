"""Publish only the iopub messages the client needs.

Per request, ipykernel publishes 'busy', the code back ('execute_input') and 'idle' around the
output; the controller relays and inspects each, and the client parses each. The client sent the
code and ignores 'busy'; it needs 'idle' only to know that a rank's output is complete (iopub and
the reply travel on different sockets). A request that published nothing has no output to
wait for, so its reply says so (``QUIET_KEY`` in the reply's metadata) and its 'idle' is not
sent: a quiet cell costs one message per rank instead of two. A request that published anything
(a print, a display, an error) keeps its 'idle', after that output. Output still buffered in
the streams counts: an apply request's metadata is built before ipyparallel flushes them, so the
streams are flushed first there.

The reply's 'started' date goes too: the client parses it with dateutil's general parser, the
largest single cost of a reply in the kernel (9% at 64 ranks). The rank's own run time travels
instead, as seconds (``SECONDS_KEY``).
"""
from __future__ import annotations

import sys
from datetime import datetime

from jupyter_client.session import extract_header

from mlp_magic.engine import ipykernel_private

QUIET_KEY = "mlp_no_output"   # reply metadata: this request published nothing on iopub
SECONDS_KEY = "mlp_seconds"   # reply metadata: how long the request ran on the rank


def _msg_type(msg_or_type) -> str:
    return msg_or_type if isinstance(msg_or_type, str) else msg_or_type["header"]["msg_type"]


def _parent_id(parent) -> str | None:
    return extract_header(parent).get("msg_id") if parent else None


# ipykernel's private hooks this replaces (engine/ipykernel_private, which holds each use):
# without any of them the engine stays as ipykernel made it (a 'busy' and an 'idle' per request,
# which the client handles as ever), only slower.
KERNEL_HOOKS = ipykernel_private.KERNEL_HOOKS


def can_quieten(kernel) -> bool:
    return ipykernel_private.kernel_hooks(kernel) is not None


def quieten(kernel) -> bool:
    """Replace the kernel's hooks (see the module's docstring); False, changing nothing, where
    this ipykernel lacks one."""
    hooks = ipykernel_private.kernel_hooks(kernel)
    if hooks is None:
        return False
    published: set = set()   # ids of requests that published on iopub since the last reply
    quiet: set = set()       # ids of requests whose reply said "no output": no 'idle' for them
    send, publish_status, finish_metadata, get_parent = (
        hooks[name] for name in ("send", "_publish_status", "finish_metadata", "get_parent"))

    def send_noting_output(stream, msg_or_type, content=None, parent=None, *args, **kwargs):
        kind = _msg_type(msg_or_type)
        if kind != "status" and not kind.endswith("_reply"):
            published.add(_parent_id(parent if parent is not None or isinstance(msg_or_type, str)
                                     else msg_or_type.get("parent_header")))
        return send(stream, msg_or_type, content, parent, *args, **kwargs)

    def finish_noting_quiet(parent, metadata, reply_content):
        metadata = finish_metadata(parent, metadata, reply_content)
        if parent["header"]["msg_type"] != "execute_request":
            # ipyparallel's apply_request builds the reply's metadata before it flushes the
            # streams (execute_request flushes first): what is still buffered is output too.
            sys.stdout.flush()
            sys.stderr.flush()
        started = metadata.pop("started", None)
        if isinstance(started, datetime):
            metadata[SECONDS_KEY] = max(0.0, (datetime.now(started.tzinfo) - started).total_seconds())
        msg_id = _parent_id(parent)
        if msg_id not in published:
            metadata[QUIET_KEY] = True
            quiet.add(msg_id)
        published.clear()   # one request at a time; late output of older ones needs no entry
        return metadata

    def status_without_noise(status, channel, parent=None):
        if status == "busy":
            return
        if status == "idle":
            msg_id = _parent_id(parent or get_parent(channel))
            if msg_id in quiet:
                quiet.discard(msg_id)
                return
        publish_status(status, channel, parent)

    ipykernel_private.replace_hooks(kernel, send_noting_output, finish_noting_quiet, status_without_noise,
                                    lambda code, parent, execution_count: None)
    return True


def unquieten() -> bool:
    """Back to ipykernel's own hooks (a 'busy', the code and an 'idle' per request): for a
    client that cannot complete a quiet request's output (client/ipp_private.reply_hooks). Sent
    as a request itself, before any that waits on its output: its own reply is plain already."""
    return ipykernel_private.restore_all()
