"""``python -m mlp_magic.agent``: the per-host agent's process.

Served (the World's, started by ``agent/rank/start``): the first line on stdin is the setup,
``{"key": hex, "bind": address, "ranks": {rank: {"pid", "create_time", "pgid", "sid"}}, "log_root": path,
"tls": {"cert", "key"} or null}`` (TLS: agent/tls)
(on stdin, never on argv: ``ps`` shows argv); the first line on stdout is the answer,
``{"port": N, "pid": P}`` or ``{"error": "..."}``. It then serves ``agent/server`` until its
stdin closes or its parent ends (the rank that started it died); then it stops what the host's
ranks that have ended left in their groups (agent/leftovers), and exits.

``--stdio`` (``mlp-magic top`` over ssh, where no World runs): the subscribe stream on stdout,
no key (ssh authenticated the caller), until stdin closes or stdout's reader leaves.

Either way SIGINT is ignored: a Ctrl-C meant for the World's ranks is not meant for it.
"""
from __future__ import annotations

import json
import os
import signal
import ssl
import sys
import threading
import time

from mlp_magic import config
from mlp_magic.core.proc_stat import process_id, start_time
from mlp_magic.errors import MlpMagicError
from mlp_magic.world.pure.record import rank_key
from mlp_magic.gpu.sampler import open_sampler
from mlp_magic.agent.feed import Feed
from mlp_magic.agent.protocol import key_bytes
from mlp_magic.agent.server import AgentServer, listening_socket
from mlp_magic.agent.tls import server_context


def _setup(line: bytes) -> dict:
    """The setup line, checked: {"key": bytes, "bind", "ranks": {int: {"pid", "create_time"}}, "log_root"}."""
    try:
        setup = json.loads(line.decode("utf-8"))
        key = key_bytes(setup["key"])
        ranks = {_rank_number(rank): _identity(info) for rank, info in dict(setup.get("ranks") or {}).items()}
        bind = _text(setup, "bind") or "127.0.0.1"
        log_root = _text(setup, "log_root") or config.log_root()
        tls = setup.get("tls") and {"cert": _text(setup["tls"], "cert", ascii_only=True),
                                    "key": _text(setup["tls"], "key", ascii_only=True)}
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError, RecursionError,
            OverflowError) as error:
        raise MlpMagicError(f"bad agent setup on stdin: {type(error).__name__}: {error}"[:300]) from None
    if not key:
        raise MlpMagicError("bad agent setup on stdin: an empty key")
    return {"key": key, "bind": bind, "ranks": ranks, "log_root": log_root, "tls": tls or None}


def _rank_number(text: str) -> int:
    """A rank's key ("3", as world/pure/record reads one); ValueError for " 3", "+3" or "²"."""
    rank = rank_key(text)
    if rank is None:
        raise ValueError(f"rank {text[:20]!r} is not a number")
    return rank


def _identity(info: dict) -> dict:
    """A rank's {"pid", "create_time", "pgid", "sid"}: the agent signals that pid, and ends those
    groups, so each names a process it may signal (not 0, -1, 1, nor past a C int), and the start
    time is a number (NaN would pass the agent's check of it)."""
    pid, started = process_id(info["pid"]), start_time(info["create_time"])
    groups = {key: process_id(info[key]) for key in ("pgid", "sid") if info.get(key) is not None}
    if pid is None or started is None or None in groups.values():
        shown = {key: info.get(key) for key in ("pid", "create_time", "pgid", "sid")}
        raise ValueError(f"a rank's process is not one: {shown}")
    return {"pid": pid, "create_time": started, **groups}


def _text(setup: dict, name: str, ascii_only: bool = False) -> str | None:
    """A text of the setup, or None where it is absent; ValueError for another type, or one no
    address, path or PEM holds (a NUL, JSON's "\\ud800")."""
    value = setup.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or "\0" in value or (ascii_only and not value.isascii()):
        raise ValueError(f"{name}: expected text, got {value!r}"[:100])
    os.fsencode(value)   # UnicodeEncodeError (a ValueError) where no path can hold it
    return value


def _setup_line() -> bytes:
    """The first line on stdin, read from the descriptor itself: a buffered reader could take
    more than the line, and the lifeline's watch reads the descriptor after it."""
    line = b""
    while not line.endswith(b"\n") and len(line) <= 1 << 20:
        chunk = os.read(0, 1)
        if not chunk:
            break
        line += chunk
    return line


def _say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _start_thread(target, *args) -> None:
    threading.Thread(target=target, args=args, name=getattr(target, "__name__", "agent"), daemon=True).start()


def _parent_fd(parent: int) -> int | None:
    """A pidfd of our parent (readable once it ends), or None: no pidfds here, or it is gone."""
    try:
        return os.pidfd_open(parent)
    except (AttributeError, OSError):
        return None


def _watch_lifeline(stop: threading.Event, parent: int) -> None:
    """Set ``stop`` when stdin closes (the rank that started us died) or our parent ends (it died
    while a child it forked still holds the pipe): woken by either, through the parent's pidfd;
    where there is none, the parent is looked at once a second."""
    import select

    parent_fd = _parent_fd(parent)
    watched = [0] if parent_fd is None else [0, parent_fd]
    try:
        while os.getppid() == parent:   # (checked after the pidfd opened: it may be of a reused pid)
            ready = select.select(watched, [], [], 1.0 if parent_fd is None else None)[0]
            if parent_fd in ready or (0 in ready and not os.read(0, 4096)):
                break
    except OSError:
        pass
    finally:
        if parent_fd is not None:
            os.close(parent_fd)
    stop.set()


def _start_feed(stop: threading.Event) -> Feed:
    """The sampling loop and the lifeline's watch, started."""
    feed = Feed(open_sampler)
    _start_thread(feed.run, stop, 1.0)
    _start_thread(_watch_lifeline, stop, os.getppid())
    return feed


def serve() -> int:
    stop = threading.Event()
    try:
        setup = _setup(_setup_line())
        tls = setup["tls"] and server_context(setup["tls"]["cert"], setup["tls"]["key"])
        listener = listening_socket(setup["bind"])
    except (MlpMagicError, OSError, ssl.SSLError) as error:
        _say({"error": str(error) if isinstance(error, MlpMagicError) else f"cannot listen: {error}"})
        return 2
    feed = _start_feed(stop)
    server = AgentServer(listener, feed, setup["key"], setup["ranks"], setup["log_root"], tls=tls or None)
    _start_thread(server.serve_forever)
    _say({"port": server.port, "pid": os.getpid()})
    stop.wait()
    _end_leftovers(list(setup["ranks"].values()))
    return 0


RANKS_ENDING_S = 5.0   # after the agent's own rank: how long the host's other ranks have to end


def _end_leftovers(ranks: list) -> None:
    """What the host's ranks left in their groups, once they ended (a World stopping ends them
    all; a rank still running afterwards is not stopping, and keeps what it made)."""
    from mlp_magic.agent.leftovers import end_groups, own_groups
    from mlp_magic.machine.deadline import until

    def ended(rank: dict) -> bool:
        return not os.path.exists(f"/proc/{rank['pid']}")   # (a reused pid: own_groups tells)

    # a rank's end announces nothing to us (not our child; no pidfd kept): looked at again
    until(lambda: all(ended(rank) for rank in ranks), time.monotonic() + RANKS_ENDING_S, longest_s=0.2)
    end_groups(own_groups([rank for rank in ranks if ended(rank)]))


def stream_to_stdout() -> int:
    stop = threading.Event()
    feed = _start_feed(stop)
    subscriber = feed.subscribe()
    out = sys.stdout.buffer
    while not stop.is_set():
        line = subscriber.next_line(0.5)
        try:
            if line is not None:
                out.write(line)
                out.flush()
        except (OSError, ValueError):   # the reader left (ssh ended, | head)
            break
    return 0


def main(argv=None) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--stdio"]):
        sys.stderr.write("usage: python -m mlp_magic.agent [--stdio] (the setup line comes on stdin)\n")
        return 2
    return stream_to_stdout() if argv else serve()


if __name__ == "__main__":
    code = main()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)   # at once: daemon threads may sit in a socket or an NVML wait
