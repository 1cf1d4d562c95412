"""Shared by the live panel's benchmarks: a jupyter_server with mlp_magic's extension, and the
two ways a panel can watch it, each in its own thread with its own asyncio loop.

- ``SocketWatcher``: one websocket on ``mlp-magic/live`` (what an open panel holds), applying
  snapshot and patch messages to its copy of the document, counting bytes and messages.
- ``Poller``: ``GET mlp-magic/cluster`` every ``interval`` s (the panel before the websocket,
  and its fallback today): the peer.

Each calls ``on_doc(doc, when)`` with the monotonic time a new document arrived.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Callable

from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

from mlp_magic.cluster.pure.delta import apply


class _LoopThread:
    """A coroutine run in a daemon thread with its own loop; ``stop`` ends it."""

    def __init__(self, name: str):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name=name, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    async def _main(self) -> None:
        task = asyncio.ensure_future(self.watch())
        while not self._stop.is_set() and not task.done():
            await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    async def watch(self) -> None:
        raise NotImplementedError


class SocketWatcher(_LoopThread):
    def __init__(self, base_url: str, token: str, on_doc: Callable = lambda doc, when: None):
        super().__init__("bench-socket")
        self.url = base_url.replace("http://", "ws://") + "mlp-magic/live"
        self.token = token
        self.on_doc = on_doc
        self.doc = None
        self.bytes = 0
        self.messages: dict = {}
        self.connected = threading.Event()
        self.opened_at: float | None = None   # monotonic: the socket connected
        self.first_at: dict = {}              # message type -> monotonic time its first arrived

    async def watch(self) -> None:
        request = HTTPRequest(self.url, headers={"Authorization": f"token {self.token}"})
        ws = await websocket_connect(request)
        self.opened_at = time.monotonic()
        self.connected.set()
        try:
            while True:
                text = await ws.read_message()
                if text is None:
                    return
                when = time.monotonic()
                self.bytes += len(text.encode() if isinstance(text, str) else text)
                message = json.loads(text)
                kind = message.get("type")
                self.messages[kind] = self.messages.get(kind, 0) + 1
                self.first_at.setdefault(kind, when)
                if kind == "snapshot":
                    self.doc = message["doc"]
                elif kind == "patch" and self.doc is not None:
                    self.doc = apply(self.doc, message["ops"])
                else:
                    continue
                self.on_doc(self.doc, when)
        finally:
            ws.close()


class Poller(_LoopThread):
    def __init__(self, base_url: str, token: str, interval: float,
                 on_doc: Callable = lambda doc, when: None):
        super().__init__("bench-poller")
        self.url = base_url + "mlp-magic/cluster"
        self.token = token
        self.interval = interval
        self.on_doc = on_doc
        self.bytes = 0
        self.requests = 0

    async def watch(self) -> None:
        client = AsyncHTTPClient(force_instance=True)
        headers = {"Authorization": f"token {self.token}"}
        start = time.monotonic()
        try:
            while True:
                reply = await client.fetch(self.url, headers=headers, request_timeout=10)
                when = time.monotonic()
                self.requests += 1
                self.bytes += len(reply.body)
                self.on_doc(json.loads(reply.body), when)
                await asyncio.sleep(self.interval - (time.monotonic() - start) % self.interval)
        finally:
            client.close()


def main() -> None:
    """``python live_watch.py BASE_URL TOKEN``: one panel's websocket in a process of its own (as a
    browser tab is), until stdin closes; prints {"messages": {...}, "bytes": n} then."""
    import sys

    watcher = SocketWatcher(sys.argv[1], sys.argv[2]).start()
    if not watcher.connected.wait(15):
        raise SystemExit("the websocket did not connect")
    print("connected", flush=True)
    sys.stdin.read()
    watcher.stop()
    print(json.dumps({"messages": watcher.messages, "bytes": watcher.bytes}), flush=True)


if __name__ == "__main__":
    main()
