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

from mlp_magic.core.host_command import shell_argv, without_rank_variables


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

    def pump(source, sink):
        for line in source:
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
    for thread in pumps:
        thread.join(5)
    for pipe in (proc.stdout, proc.stderr):  # a background child holding them must not print later
        pipe.close()
    return {"exit_code": None if timed_out else proc.returncode, "timed_out": timed_out,
            "seconds": time.monotonic() - started}
