"""The agent's wire format: JSON lines over TCP, one request per connection, HMAC-authenticated.

    agent -> client   {"agent": 1, "nonce": "<32 hex digits>"}
    client -> agent   {"auth": hmac_sha256(key, nonce), "op": one of OPS, ...}
    agent -> client   the answer: one line ({"signalled": [...]}, {"text": ...}), or for
                      "subscribe" a stream: {"type": "static"}, {"type": "history"}, then one
                      {"type": "sample"} a second; or one {"error": "..."} line, then it closes.

``auth`` is the hex HMAC-SHA256 of the nonce's ASCII text under the key (``bytes.fromhex`` of
the World's ``agent_key``); the nonce is new for every connection, so a digest seen on the wire
is worth nothing later. Shared by the agent (threads) and its client (asyncio).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets

VERSION = 1
LINE_LIMIT = 64 * 1024          # a request line; answers may be longer (a 1 MiB tail)
ANSWER_LIMIT = 4 * 1024 * 1024  # what a client reads in one line
OPS = ("subscribe", "interrupt", "unblock", "progress", "tail")


class RequestError(Exception):
    """A request the agent refuses: its message goes back as the one error line."""


def new_nonce() -> str:
    return secrets.token_hex(16)


def key_bytes(key) -> bytes:
    """The HMAC key from its hex form (the World file's) or bytes; bad hex: ValueError."""
    return bytes(key) if isinstance(key, (bytes, bytearray)) else bytes.fromhex(str(key))


def secret_and_cert(key) -> tuple:
    """A World's agent key as its record keeps it: hex (plain TCP), or ``{"key": hex, "cert":
    PEM}`` (TLS, that certificate pinned: agent/tls); (the HMAC key's bytes, the PEM or None)."""
    if isinstance(key, dict):
        if not key.get("key"):
            raise ValueError("a TLS agent key with no key")
        return key_bytes(key["key"]), key.get("cert") or None
    return key_bytes(key), None


def auth_digest(key: bytes, nonce: str) -> str:
    return hmac.new(key, nonce.encode("ascii", "replace"), hashlib.sha256).hexdigest()


def authentic(key: bytes, nonce: str, digest) -> bool:
    """Whether ``digest`` proves the key, compared in constant time."""
    return isinstance(digest, str) and hmac.compare_digest(auth_digest(key, nonce), digest)


def encode(message: dict) -> bytes:
    """One line of the protocol (no NaN: JSON has none)."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def decode_request(line: bytes) -> dict:
    """A client's request line as an object; anything else: RequestError."""
    if len(line) > LINE_LIMIT or (line and not line.endswith(b"\n") and len(line) >= LINE_LIMIT):
        raise RequestError(f"request longer than {LINE_LIMIT} bytes")
    try:
        request = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RequestError("the request is not a JSON line") from None
    except RecursionError:   # valid JSON, "[[[[...]]]]" deeper than the interpreter's stack
        raise RequestError("the request is nested too deeply") from None
    if not isinstance(request, dict):
        raise RequestError("the request is not a JSON object")
    return request
