"""In each rank, for ``%%mpirun --profile``: py-spy samples this process from outside while the
cell runs, and what it recorded comes back with the collectives the rank entered meanwhile.

Each rank starts its own py-spy on its own host, so the ranks of every host are sampled at once
with no ssh. py-spy reads the rank's memory (ptrace's permission): where Yama restricts ptrace to
a process's ancestors, the rank names its child as its tracer first (``PR_SET_PTRACER``), and the
child only then becomes py-spy (a shell waiting on a line, then ``exec``: the same pid).
``--nonblocking``: the rank is never paused, so the profiled loop runs at its own speed.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time

from mlp_magic import config
from mlp_magic.engine.bootstrap import running_engine_shell
from mlp_magic.engine.private_files import open_private, private_dirs
from mlp_magic.machine.programs import find_pyspy
from mlp_magic.stacks.pure.pyspy import NO_PYSPY_FIX, PTRACE, PTRACE_FIX, classify_failure
from mlp_magic.stacks.rank.recorder import entered_since

STARTED = "Sampling process"   # py-spy's first line once it samples
START_WAIT_S = 5.0
STOP_WAIT_S = 10.0
PR_SET_PTRACER = 0x59616D61
_RUNNING: dict = {}   # {token: Sampler}: one per profiled cell


class Sampler:
    def __init__(self, process, output: str, log: str, since_ns: int):
        self.process, self.output, self.log, self.since_ns = process, output, log, since_ns
        self.told = False   # py-spy was told to stop
        self.unhook = lambda: None   # takes back the cell's end's hook (_stop_after_the_cell)

    def tell_to_stop(self) -> None:
        """Ctrl-C to py-spy: it writes what it has once its current sample is in (up to 1/rate s)."""
        if not self.told and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        self.told = True


def _stop_after_the_cell(sampler: Sampler) -> None:
    """py-spy told to stop as the rank's cell ends (IPython's ``post_run_cell``), so that what it
    recorded is written while the kernel hears of the cell's end; at a low rate that is most of
    the wait. The start and stop come as our calls, not cells: they fire no such event."""
    shell = running_engine_shell()
    if shell is None:   # not in an engine: the stop's own signal will do
        return

    def once(result) -> None:
        sampler.unhook()
        sampler.tell_to_stop()

    def unhook() -> None:   # once: at the cell's end, or at a stop that came first
        sampler.unhook = lambda: None
        try:
            shell.events.unregister("post_run_cell", once)
        except ValueError:
            pass
    shell.events.register("post_run_cell", once)
    sampler.unhook = unhook


def start(token: str, rate: int, native: bool, pyspy: str | None = None) -> dict:
    """py-spy recording this rank; {"pid"} once it samples, or {"error"} (none left running)."""
    stop_all()   # a sampler whose cell's stop never came (the kernel died meanwhile)
    program = find_pyspy(pyspy)
    if program is None:
        return {"error": f"no py-spy on this host: {NO_PYSPY_FIX}"}
    folder = private_dirs(os.path.join(config.home(), "run", "profile"))
    output, log = (os.path.join(folder, f"{token}-{os.getpid()}.{kind}") for kind in ("txt", "log"))
    argv = [program, "record", "--pid", str(os.getpid()), "--rate", str(rate), "--format", "raw",
            "--output", output, "--nonblocking", "--idle", "--threads", "--full-filenames"]
    with open_private(log) as handle:
        argv += ["--native"] * native
        process = subprocess.Popen(["/bin/sh", "-c", 'read _ && exec "$@"', "sh", *argv],
                                   stdin=subprocess.PIPE, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)   # the cell's Ctrl-C is not py-spy's
    _allow_tracing_by(process.pid)
    process.stdin.write(b"go\n")
    process.stdin.close()
    sampler = Sampler(process, output, log, time.time_ns())
    problem = _until_sampling(sampler)
    if problem:
        _end(sampler)
        return {"error": problem}
    _RUNNING[token] = sampler
    _stop_after_the_cell(sampler)
    return {"pid": process.pid}


def _allow_tracing_by(pid: int) -> None:
    """Yama's ptrace_scope 1 lets only ancestors trace: name py-spy (our child) as our tracer.
    Elsewhere (no Yama, scope 0, root) the call fails harmlessly."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PTRACER, pid, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _until_sampling(sampler: Sampler) -> str:
    """"" once py-spy samples; else why it did not (it exited, or said nothing in time)."""
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        said = _read(sampler.log)
        if STARTED in said:
            return ""
        if sampler.process.poll() is not None:
            cause, message = classify_failure(said)
            fix = f"; {PTRACE_FIX}" if cause == PTRACE else ""
            return f"py-spy could not sample this rank: {message}{fix}"
        time.sleep(0.02)
    return f"py-spy did not start sampling within {START_WAIT_S:g} s"


def stop(token: str) -> dict:
    """{"raw": what py-spy recorded, "entered": the collectives entered meanwhile}, or {"error"}."""
    sampler = _RUNNING.pop(token, None)
    if sampler is None:
        return {"error": "not sampled: py-spy was not running in this rank"}
    ended = _end(sampler)
    raw = _read(sampler.output)
    for path in (sampler.output, sampler.log):
        _remove(path)
    if not ended or not raw:
        return {"error": "py-spy wrote no samples" + ("" if ended else " (it did not stop in time)")}
    try:
        entered = entered_since(sampler.since_ns)
    except Exception as err:   # noqa: BLE001 - the samples still count without the arrivals
        return {"raw": raw, "entered": [], "note": f"the flight recorder's dump failed: {err}"}
    return {"raw": raw, "entered": entered}


def _end(sampler: Sampler) -> bool:
    """py-spy told to write what it has (Ctrl-C), killed if it does not stop in time."""
    process = sampler.process
    sampler.unhook()   # a profile refused before its cell: no hook left for the next cell
    sampler.tell_to_stop()
    try:
        process.wait(STOP_WAIT_S)
        return True
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False


def stop_all() -> None:
    for token in list(_RUNNING):
        sampler = _RUNNING.pop(token)
        _end(sampler)
        for path in (sampler.output, sampler.log):
            _remove(path)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
