"""Talking to an agent from asyncio: the server's aggregator and ``mlp-magic top``.

    answer = await call(addr, port, key, "interrupt", timeout=5)        # {"signalled": [...], ...}
    answer = await call(addr, port, key, "tail", rank=3, stream="stderr", log_dir=cell_dir)
    await subscribe(addr, port, key, on_message)     # static, history, then a sample a second

``key`` is the World's ``agent_key``: hex or its bytes (plain TCP), or ``{"key", "cert"}``
(TLS to an agent holding that certificate, pinned: agent/tls). Whatever goes wrong is one
``AgentError`` saying which: the connection was refused (no agent there), the agent refused
the key, it did not answer in time, or it refused the request (its own words).
"""
from __future__ import annotations

import asyncio
import inspect
import json

from mlp_magic.errors import MlpMagicError
from mlp_magic.agent.protocol import ANSWER_LIMIT, auth_digest, secret_and_cert
from mlp_magic.agent.tls import AGENT_NAME, client_context

DEFAULT_TIMEOUT_S = 10.0


class AgentError(MlpMagicError):
    """An agent could not be reached or did not do what was asked; the message says which."""


def _where(addr: str, port: int) -> str:
    return f"agent at [{addr}]:{port}" if ":" in addr else f"agent at {addr}:{port}"


async def _line(reader: asyncio.StreamReader, timeout: float, where: str) -> dict | None:
    """The next JSON line (None at the end of the stream)."""
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    except asyncio.TimeoutError:
        raise AgentError(f"{where} did not answer within {timeout:g} s") from None
    except (ValueError, asyncio.LimitOverrunError):
        raise AgentError(f"{where} sent a line longer than {ANSWER_LIMIT} bytes") from None
    except OSError as error:
        raise AgentError(f"{where}: connection lost: {error.strerror or error}") from None
    if not line:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):   # RecursionError: "[[[[...]]]]", nested too deeply
        raise AgentError(f"{where} sent something that is not JSON: {line[:60]!r}") from None
    if not isinstance(message, dict):
        raise AgentError(f"{where} sent a JSON line that is not an object")
    if "type" not in message and message.get("error") is not None:   # a stream's messages have a type
        error = str(message["error"])
        if error == "bad auth":
            raise AgentError(f"{where} refused our key (bad auth)")
        raise AgentError(f"{where}: {error}")
    return message


async def _request(addr: str, port: int, key, op: str, args: dict, timeout: float) -> tuple:
    """An open, authenticated connection with the request sent: (reader, writer, where)."""
    where = _where(addr, port)
    try:
        secret, cert = secret_and_cert(key)
    except (ValueError, TypeError):
        raise AgentError(f"{where}: the key is not hex") from None
    try:
        tls = {"ssl": client_context(cert), "server_hostname": AGENT_NAME} if cert else {}
        connecting = asyncio.open_connection(addr, port, limit=ANSWER_LIMIT, **tls)
        reader, writer = await asyncio.wait_for(connecting, timeout)
    except asyncio.TimeoutError:
        raise AgentError(f"{where} did not answer within {timeout:g} s") from None
    except ConnectionRefusedError:
        raise AgentError(f"{where}: connection refused (no agent listens there)") from None
    except OSError as error:
        raise AgentError(f"{where}: cannot connect: {error.strerror or error}") from None
    try:
        greeting = await _line(reader, timeout, where)
        if greeting is None or not isinstance(greeting.get("nonce"), str):
            raise AgentError(f"{where} did not greet us as an agent does")
        request = {"auth": auth_digest(secret, greeting["nonce"]), "op": op, **args}
        writer.write(json.dumps(request).encode() + b"\n")
        await writer.drain()
    except BaseException:
        writer.close()
        raise
    return reader, writer, where


async def _closed(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass


async def call(addr: str, port: int, key, op: str, *, timeout: float = DEFAULT_TIMEOUT_S, **args) -> dict:
    """One request ("interrupt", "tail"), its one-line answer; an AgentError otherwise."""
    reader, writer, where = await _request(addr, port, key, op, args, timeout)
    try:
        answer = await _line(reader, timeout, where)
    finally:
        await _closed(writer)
    if answer is None:
        raise AgentError(f"{where} closed the connection without an answer")
    return answer


async def subscribe(addr: str, port: int, key, on_message, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
    """Call ``on_message(message)`` (a function or a coroutine function) for every message of
    the agent's stream until it ends (the agent exited: this returns) or goes silent for
    ``timeout`` seconds (AgentError). Cancel the task to stop listening."""
    reader, writer, where = await _request(addr, port, key, "subscribe", {}, timeout)
    try:
        while True:
            message = await _line(reader, timeout, where)
            if message is None:
                return
            done = on_message(message)
            if inspect.isawaitable(done):
                await done
    finally:
        await _closed(writer)
