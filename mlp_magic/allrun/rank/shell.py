"""``%allrun`` through a live World: run a shell command on this engine's host (its first rank).

The command runs by allrun's one rule (core/host_command: the kernel's folder else $HOME, bash,
the forwarded and host variables), without this rank's own variables: as over ssh, it is no
rank. Lines are printed as they come (the client streams them, tagged by host); the process
runs in a session of its own so a timeout or an interrupt kills everything it started.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from mlp_magic.core.host_command import (BACKGROUND_GRACE_S, LEFT_IN_THE_BACKGROUND, shell_argv,
                                         without_rank_variables)


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_shell(command: str, timeout: float | None = None, folder: str = "",
              variables: dict | None = None) -> dict:
    """Run ``command`` on this engine's host in ``folder`` (else $HOME) with ``variables``
    (core/host_command.host_variables, made by the kernel); the exit code, or timed out."""
    started = time.monotonic()
    proc = subprocess.Popen(shell_argv(folder, command, variables or {}), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                            start_new_session=True, env=without_rank_variables(os.environ))

    done = threading.Event()   # after it, what a background process still prints is dropped

    def pump(source, sink):
        for line in source:
            if done.is_set():
                continue
            sink.write(line)
            sink.flush()

    pumps = [threading.Thread(target=pump, args=(proc.stdout, sys.stdout), daemon=True),
             threading.Thread(target=pump, args=(proc.stderr, sys.stderr), daemon=True)]
    for thread in pumps:
        thread.start()
    timed_out = False
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    except BaseException:  # interrupted (SIGINT from the client): the command goes too
        _kill_group(proc)
        raise
    if timed_out:
        _kill_group(proc)
    _finish_output(pumps, done)
    return {"exit_code": None if timed_out else proc.returncode, "timed_out": timed_out,
            "seconds": time.monotonic() - started}


def _finish_output(pumps: list, done: threading.Event) -> None:
    """The output still coming for ``BACKGROUND_GRACE_S``; a process the command left in the
    background may hold the pipes for long (``sh -c 'sleep 100 & echo bg'``): not waited for,
    said in one line, and what it prints later is dropped (never shown in a later cell). The
    pumps are not closed under a read: closing a reader another thread reads waits for that read."""
    deadline = time.monotonic() + BACKGROUND_GRACE_S
    for thread in pumps:
        thread.join(max(0.0, deadline - time.monotonic()))
    done.set()
    if any(thread.is_alive() for thread in pumps):
        sys.stderr.write(LEFT_IN_THE_BACKGROUND)
        sys.stderr.flush()
