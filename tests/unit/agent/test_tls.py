"""The agents' TLS (agent/tls): a real agent server on loopback with a certificate made by openssl,
its asyncio client pinning it. The World's own certificate works; another World's, or none, is
refused in one line; what crosses the socket is not the cell's output in the clear."""
from __future__ import annotations

import asyncio
import secrets
import socket
import threading

import pytest

from mlp_magic.agent.client import AgentError, call
from mlp_magic.agent.feed import Feed
from mlp_magic.agent.protocol import key_bytes, secret_and_cert
from mlp_magic.agent.server import AgentServer, listening_socket
from mlp_magic.agent.tls import make_certificate, server_context

KEY = secrets.token_hex(32)
CERT, CERT_KEY = make_certificate()
MARKER = "the-cell-printed-this-7f3a"


@pytest.fixture
def agent(tmp_path):
    listener = listening_socket("127.0.0.1")
    served = AgentServer(listener, Feed(lambda: None, host="w0"), key_bytes(KEY), {}, str(tmp_path),
                         tls=server_context(CERT, CERT_KEY))
    threading.Thread(target=served.serve_forever, daemon=True).start()
    (tmp_path / "rank0.stdout").write_text(MARKER + "\n")
    yield served
    listener.close()


def tail(port: int, key, log_dir) -> dict:
    asked = call("127.0.0.1", port, key, "tail", rank=0, log_dir=str(log_dir), timeout=5)
    return asyncio.run(asyncio.wait_for(asked, 20))


def test_the_worlds_certificate_is_served_and_trusted(agent, tmp_path):
    assert tail(agent.port, {"key": KEY, "cert": CERT}, tmp_path)["text"] == MARKER + "\n"


def test_another_worlds_certificate_and_plain_tcp_are_refused(agent, tmp_path):
    other, _ = make_certificate()
    refused = r"^agent at 127\.0\.0\.1:\d+: cannot connect: .*certificate verify failed"
    with pytest.raises(AgentError, match=refused):
        tail(agent.port, {"key": KEY, "cert": other}, tmp_path)
    with pytest.raises(AgentError):
        tail(agent.port, KEY, tmp_path)   # a plain client gets no greeting it can read
    assert tail(agent.port, {"key": KEY, "cert": CERT}, tmp_path)["text"] == MARKER + "\n"   # still serving


def test_nothing_is_said_in_the_clear(agent):
    """A plain agent greets every connection with its nonce at once; a TLS one says nothing
    before a client's hello."""
    with socket.create_connection(("127.0.0.1", agent.port), timeout=10) as raw:
        raw.settimeout(1.0)
        with pytest.raises(socket.timeout):
            raw.recv(4096)


def test_the_record_form_of_the_key():
    assert secret_and_cert(KEY) == (bytes.fromhex(KEY), None)
    assert secret_and_cert({"key": KEY, "cert": CERT}) == (bytes.fromhex(KEY), CERT)
    with pytest.raises(ValueError):
        secret_and_cert({"cert": CERT})
