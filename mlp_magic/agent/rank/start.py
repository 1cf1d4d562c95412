"""Start this host's agent from a rank: the World asks each host's first engine, after bootstrap.

``start_agent(key_hex, bind_addr, ranks, log_root)`` runs ``python -m mlp_magic.agent`` with
this engine's Python, environment and copy of mlp_magic, hands it the setup on its stdin (the
key never appears on a command line), reads ``{"port", "pid"}`` back from its first line of
output, and keeps the stdin pipe open: that pipe is the agent's lifeline, closed by the kernel
when this engine dies, however it dies, and the agent then exits. A second call in the same
engine returns the running agent's answer (the World runs this as a host chore,
``engine/bootstrap.run_chore``, which keeps this module, with ``_agent``, for its next run).

The agent gets a session of its own, so a Ctrl-C or a SIGINT sent to the engines' process
group never reaches it (and it ignores SIGINT besides): interrupting a cell must not stop the
GPU view. ``process_create_time`` is what ``ranks`` carries for each pid (the agent checks it
again before it signals one). Standard library, ``core`` and ``errors`` only (engine rules).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time

from mlp_magic.location import PACKAGE_PARENT
from mlp_magic.core.host_command import helper_environment
from mlp_magic.core.proc_stat import create_time, process_id
from mlp_magic.errors import MlpMagicError

_lock = threading.Lock()
_agent: dict = {}   # this engine's agent: {"process": Popen, "answer": {"port", "pid"}}


def process_create_time(pid: int | None = None) -> float | None:
    """When the process ``pid`` (default: this one) started, as the agent will check it."""
    try:
        with open(f"/proc/{pid or os.getpid()}/stat", "rb") as stat, open("/proc/stat", "rb") as boot:
            return create_time(stat.read(), boot.read(), os.sysconf("SC_CLK_TCK"))
    except OSError:
        return None


def _environment() -> dict:
    """The agent's environment: this engine's, as any helper of a rank has it."""
    return helper_environment(os.environ, PACKAGE_PARENT)


def _first_line(fd: int, timeout: float) -> bytes:
    """The agent's first line of output; b"" when it ended first; TimeoutError when late."""
    import select

    deadline = time.monotonic() + timeout
    received = b""
    while b"\n" not in received:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            received += chunk
    return received.split(b"\n", 1)[0]


def error_line(text: str) -> str:
    """What a failed Python said, in one line: its last line naming an error (a traceback's
    exception, "Fatal Python error: ..."), else its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or [""])[-1][:300]


def _refused(process, errors, why: str) -> MlpMagicError:
    """Stop a failed agent; the error names why and what it said on stderr."""
    if process.poll() is None:
        process.kill()
    process.wait()
    errors.seek(0)
    said = error_line(errors.read()[-8192:].decode("utf-8", "replace"))
    return MlpMagicError(f"the GPU agent did not start: {why}" + (f" ({said})" if said else ""))


def _spawn(setup: bytes, timeout: float) -> tuple:
    import subprocess
    import tempfile

    errors = tempfile.TemporaryFile()   # read only if the start fails; deleted with the file object
    process = subprocess.Popen([sys.executable, "-m", "mlp_magic.agent"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=errors, env=_environment(), bufsize=0,
                               start_new_session=True)
    try:
        process.stdin.write(setup)
        line = _first_line(process.stdout.fileno(), timeout)
    except TimeoutError:
        raise _refused(process, errors, f"no port within {timeout:g} s") from None
    except OSError as error:
        raise _refused(process, errors, f"{error.strerror or error}") from None
    try:
        answer = json.loads(line)
    except (ValueError, RecursionError):
        answer = {"error": f"it said {line[:100]!r}" if line else "it exited"}
    if not isinstance(answer, dict) or "error" in answer or "port" not in answer:
        raise _refused(process, errors, str(answer.get("error") if isinstance(answer, dict) else answer))
    port, pid = answer["port"], process_id(answer.get("pid"))
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536 or pid is None:
        # what the World records of its agent: a port and a pid as they can be (JSON also reads NaN)
        raise _refused(process, errors, f"it said {line[:100]!r}")
    process.stdout.close()   # it writes nothing more; stdin stays open: the lifeline
    return process, {"port": port, "pid": pid}


def start_agent(key_hex: str, bind_addr: str, ranks: dict, log_root: str, timeout: float = 10.0,
                tls: dict | None = None) -> dict:
    """This host's agent, started once per engine: {"port", "pid"}. ``ranks``: {rank: {"pid",
    "create_time", "pgid", "sid"}} of this host's engines (the ones it may interrupt, and whose
    groups it empties when they end); ``log_root``: the only
    folder whose cell logs it may read; ``tls``: {"cert", "key"} PEMs it serves TLS with (a World
    across hosts: agent/tls). A start that fails: one MlpMagicError."""
    with _lock:
        running = _agent.get("process")
        if running is not None and running.poll() is None:
            return dict(_agent["answer"])
        setup = {"key": key_hex, "bind": bind_addr, "log_root": log_root, "tls": tls,
                 "ranks": {str(rank): {"pid": info["pid"], "create_time": info["create_time"],
                                       "pgid": info.get("pgid"), "sid": info.get("sid")}
                           for rank, info in ranks.items()}}
        process, answer = _spawn(json.dumps(setup).encode() + b"\n", timeout)
        _agent.update(process=process, answer=answer)
        return dict(answer)
