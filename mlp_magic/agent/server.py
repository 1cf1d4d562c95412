"""The agent's TCP side: one thread per connection, one request per connection (``protocol``).

A connection that does not prove the key within ``REQUEST_TIMEOUT_S`` is closed; a bad request
gets one ``{"error": ...}`` line, never a traceback; whatever one client does, the others and
the agent go on. At most ``MAX_CONNECTIONS`` at a time: the agent stays small whoever knocks.
"""
from __future__ import annotations

import socket
import threading

from mlp_magic.agent import actions
from mlp_magic.agent.feed import Feed
from mlp_magic.agent.protocol import (LINE_LIMIT, OPS, VERSION, RequestError, authentic, decode_request,
                                      encode, new_nonce)

REQUEST_TIMEOUT_S = 10.0
SEND_TIMEOUT_S = 30.0      # a subscriber that reads nothing for this long is dropped
MAX_CONNECTIONS = 32
_IDLE_WAIT_S = 5.0         # how often a quiet subscriber's thread looks whether it should end


def listening_socket(bind_addr: str) -> socket.socket:
    """A TCP socket listening on ``bind_addr`` (IPv4 or IPv6), on a port the kernel picks."""
    family = socket.AF_INET6 if ":" in bind_addr else socket.AF_INET
    return socket.create_server((bind_addr, 0), family=family, backlog=64)


class AgentServer:
    """Serves the ops of one agent: its feed, its key, its ranks and its log root."""

    def __init__(self, listener: socket.socket, feed: Feed, key: bytes, ranks: dict, log_root: str,
                 tls=None):
        self.listener, self.feed, self.key, self.tls = listener, feed, key, tls   # tls: an SSLContext
        self.ranks, self.log_root = ranks, log_root
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    @property
    def port(self) -> int:
        return self.listener.getsockname()[1]

    def serve_forever(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return   # the listener was closed: the agent is ending
            if not self._slots.acquire(blocking=False):
                connection.close()   # too many at once: this one is refused, the rest go on
                continue
            threading.Thread(target=self._serve, args=(connection,), name="agent-connection",
                             daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        try:
            connection.settimeout(REQUEST_TIMEOUT_S)   # the TLS handshake's bound too
            if self.tls is not None:
                connection = self.tls.wrap_socket(connection, server_side=True)
            with connection:
                self._converse(connection)
        except Exception:   # a client gone, a timeout, a failed handshake, anything: this one only
            connection.close()
        finally:
            self._slots.release()

    def _converse(self, connection: socket.socket) -> None:
        nonce = new_nonce()
        connection.sendall(encode({"agent": VERSION, "nonce": nonce}))
        with connection.makefile("rb") as reader:
            line = reader.readline(LINE_LIMIT + 1)
        try:
            request = decode_request(line)
            if not authentic(self.key, nonce, request.get("auth")):
                raise RequestError("bad auth")
            if request.get("op") == "subscribe":
                return self._stream(connection)
            answer = self.answer(request)
        except RequestError as refused:
            answer = {"error": str(refused)}
        except Exception as error:   # a bug of ours: the client gets its name, not a traceback
            answer = {"error": f"internal error: {type(error).__name__}"}
        connection.sendall(encode(answer))
        return None

    def answer(self, request: dict) -> dict:
        """The one-line answer to an authenticated request other than "subscribe"."""
        op = request.get("op")
        if op == "interrupt":
            return actions.interrupt_ranks(self.ranks, request.get("ranks"))
        if op == "unblock":
            return actions.unblock_ranks(self.ranks, request.get("ranks"))
        if op == "progress":
            return actions.progress_ranks(self.ranks, request.get("ranks"))
        if op == "tail":
            return actions.tail_log(self.log_root, request)
        raise RequestError(f"unknown op {str(op)[:40]!r} (known: {', '.join(OPS)})")

    def _stream(self, connection: socket.socket) -> None:
        connection.settimeout(SEND_TIMEOUT_S)
        subscriber = self.feed.subscribe()
        try:
            while True:
                line = subscriber.next_line(_IDLE_WAIT_S)
                if subscriber.closed:
                    return
                if line is not None:
                    connection.sendall(line)
        finally:
            self.feed.unsubscribe(subscriber)
