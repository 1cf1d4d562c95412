"""The panel's websocket: ``{base_url}mlp-magic/live``, one per open panel, pushing the live model.

Authenticated like every route of the server (jupyter_server's ``prepare``; the check is repeated
here for servers that allow unauthenticated access elsewhere), authorised through the server's
authorizer (``read`` on ``mlp_magic``), and cross-site connections are refused by the server's
origin check. It only sends: a snapshot, then the aggregator's messages (cluster/live). A panel
that cannot keep up (its messages pile up unsent) is disconnected; it reconnects and starts
again from a snapshot, so the server never holds an unbounded backlog for it.
"""
from __future__ import annotations

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import JupyterHandler
from tornado import web, websocket

from mlp_magic.cluster.live import LiveCluster

AUTH_RESOURCE = "mlp_magic"
MAX_UNSENT = 64   # messages queued for one panel before it is dropped (a minute of GPU samples)


class LiveSocket(JupyterHandler, websocket.WebSocketHandler):
    auth_resource = AUTH_RESOURCE

    def initialize(self, live: LiveCluster) -> None:
        self.live = live
        self._unsubscribe = None
        self._unsent = 0

    async def get(self, *args, **kwargs):
        if self.current_user is None:
            raise web.HTTPError(403)
        allowed = await ensure_async(self.authorizer.is_authorized(self, self.current_user, "read",
                                                                   AUTH_RESOURCE))
        if not allowed:
            raise web.HTTPError(403)
        await self.live.ensure_started()
        result = super().get(*args, **kwargs)
        if result is not None:
            await result

    def open(self, *args, **kwargs) -> None:
        self._unsubscribe = self.live.subscribe(self._send)

    def _send(self, text: str) -> None:
        if self._unsent >= MAX_UNSENT:
            self.close(1013, "too far behind; reconnect for a snapshot")
            self._stop()
            return
        try:
            sent = self.write_message(text)
        except websocket.WebSocketClosedError:
            self._stop()
            return
        self._unsent += 1
        sent.add_done_callback(self._one_sent)

    def _one_sent(self, _future) -> None:
        self._unsent -= 1

    def on_message(self, message) -> None:
        """The panel sends nothing the server needs (pings are the protocol's own)."""

    def on_close(self) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
