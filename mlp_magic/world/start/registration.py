"""Wait for a starting World's engines to register: progress while they come, and a failure
that names who is missing (ranks, hosts, their last log lines, what to try).

The deadlines come from the World's size (``core.start_budget``) and from progress: a start
fails when no new rank has registered for ``stall_s``, or when it has run for ``total_s``.

The wait is woken by events, not by a clock: the client's registration events (client/ipp_private
``on_registration``), the World's lifeline when one of its processes ends (``Waiting.wake``), the
progress display's next due time and the deadlines. Only a client without registration events
is asked again every ``FALLBACK_S``.
"""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence

from mlp_magic.world.pure.budget import StartBudget
from mlp_magic.world.pure.progress import missing_report, progress_line
from mlp_magic.engine.identity import usable_cpus
from mlp_magic.engine.pure.versions import refusal_error
from mlp_magic.errors import MlpMagicError
from mlp_magic.client.ipp_private import on_registration
from mlp_magic.client.remote_errors import grouped_causes
from mlp_magic.world.start.reach import unreachable_error

FALLBACK_S = 0.05   # only where the client tells no registrations: ask its ids this often
REACH_SETTLE_S = 3.0   # a launcher that died: how long the hosts' ssh check still has to say why


class Waiting:
    """What the wait needs to know about the World being started."""

    def __init__(self, hosts_by_rank: Sequence[str], processes: list, launcher_log: Callable[[], str],
                 advice: Sequence[str], workdir: str, reach=None):
        self.reach = reach   # world/start/reach: hosts ssh cannot reach fail the start at once
        self.hosts_by_rank = list(hosts_by_rank)
        self.processes = processes
        self.launcher_log = launcher_log
        self.advice = list(advice)
        self.workdir = workdir
        self.woken = threading.Event()
        self.wakes = 0   # how often the wait woke up (the tests count them)

    def wake(self) -> None:
        """A rank registered, or one of the World's processes ended (its lifeline)."""
        self.woken.set()


def wait_for_engines(client, waiting: Waiting, budget: StartBudget, progress) -> None:
    """Return once every rank's engine has registered; ``progress(line, registered, np)`` is
    called at every wake (the display limits its own rate, and says when it is next due:
    ``progress.wake_at()``, where it has one)."""
    np = len(waiting.hosts_by_rank)
    started = time.monotonic()
    last_change = None   # the stall clock starts with the first rank: before it, ssh fan-out
    seen = 0             # and every rank's imports (from a cold, shared file system) come first
    stop_hearing = on_registration(client, waiting.wake)
    try:
        while True:
            waiting.woken.clear()   # before reading the ids: a registration after it wakes us
            ids = set(client.ids)
            now = time.monotonic()
            if len(ids) != seen:
                seen, last_change = len(ids), now
            progress(progress_line(waiting.hosts_by_rank, ids, now - started), len(ids), np)
            if len(ids) >= np:
                return
            _check_processes(waiting, ids)
            if last_change is not None and now - last_change > budget.stall_s:
                _fail(waiting, ids, f"no new rank for {budget.stall_s:.0f} s", "the World did not start: ")
            if now - started > budget.total_s:
                _fail(waiting, ids, f"gave up after {budget.total_s:.0f} s, the limit for this size",
                      "the World did not start: ")
            wake = _next_look(started, last_change, budget, progress, stop_hearing is not None)
            waiting.woken.wait(max(0.0, wake - time.monotonic()) + 0.001)   # just past a deadline
            waiting.wakes += 1
    finally:
        if stop_hearing is not None:
            stop_hearing()


def _next_look(started: float, last_change, budget: StartBudget, progress, heard: bool) -> float:
    """When to look again if no event comes first: the start's or the stall's deadline, the
    progress display's next due time; without registration events, ``FALLBACK_S`` from now."""
    times = [started + budget.total_s]
    if last_change is not None:
        times.append(last_change + budget.stall_s)
    due = getattr(progress, "wake_at", None)
    if callable(due):
        times.append(due())
    if not heard:
        times.append(time.monotonic() + FALLBACK_S)
    return min(times)


def _check_processes(waiting: Waiting, ids: set) -> None:
    dead = next((p for p in waiting.processes if not p.running()), None)
    unreachable = waiting.reach.unreachable() if waiting.reach is not None else {}
    if dead is not None and waiting.reach is not None and not unreachable:
        unreachable = waiting.reach.settle(REACH_SETTLE_S)   # ssh's own words, when it is the cause
    if unreachable:
        raise unreachable_error(unreachable)
    if dead is None:
        return
    if dead is waiting.processes[0]:   # the controller: its own log says why
        raise MlpMagicError("the World did not start: " + dead.failure())
    status = dead.popen.returncode
    # a launcher that keeps going past a rank's death (ULFM) ends with 0 after the last one
    ended = f"exited with status {status}" if status else "ended with its ranks"
    _fail(waiting, ids, f"{dead.name} {ended}", "the engines did not start: ")


def _fail(waiting: Waiting, registered: set, why: str, prefix: str) -> None:
    log_text = waiting.launcher_log()
    refused = refusal_error(log_text, waiting.hosts_by_rank)   # engine/versions: a Python we cannot use
    if refused:
        raise MlpMagicError(refused)
    missing = [rank for rank in range(len(waiting.hosts_by_rank)) if rank not in registered]
    causes = {rank: text for rank, text in last_words(log_text, waiting.processes).items() if rank in missing}
    if causes:   # ranks that died saying why: that, in one line (the others went down with them)
        raise MlpMagicError(f"{prefix}{grouped_causes(causes, waiting.hosts_by_rank.__getitem__)} "
                            f"({why}); logs in {waiting.workdir}")
    report = missing_report(waiting.hosts_by_rank, registered, why, log_text,
                            [*waiting.advice, f"every log is kept in {waiting.workdir}"])
    raise MlpMagicError(prefix + report)


# A rank's own line in the launcher's log: Open MPI's "[1,3]<stderr>: text", MPICH's "[3] text".
_TAGGED = re.compile(r"^\[(?:\d+,)?(\d+)\](?:<std(?:out|err)>)?:?\s?(.*)$")
# What a Python (or the loader) says last when it cannot start: an exception's line, a missing
# module or file. Engine log lines ("... [rank 3] [RankEngine] WARNING | ...") are not causes.
_CAUSE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit)\b.*"
                    r"|.*(?:No module named|can't open file|cannot open shared object|command not found).*")


def last_words(log_text: str, processes: list) -> dict:
    """{rank: the last line that reads as why it could not start}, from the launcher's rank-tagged
    output, or from each plain engine's own log."""
    said: dict = {}
    own_logs = [p for p in processes[1:] if p.name.startswith("engine ")]
    if own_logs:
        texts = [(int(p.name.split()[1]), line) for p in own_logs for line in _read(p.log_path).splitlines()]
    else:
        texts = [(int(m.group(1)), m.group(2)) for m in map(_TAGGED.match, log_text.splitlines()) if m]
    for rank, line in texts:
        line = line.strip()
        if _CAUSE.match(line) and "[rank " not in line:
            said[rank] = line
    return said


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as handle:
            return handle.read()[-200_000:]
    except OSError:
        return ""


def start_advice(spec, controller_ip: str) -> list:
    """What to try when ranks do not register (said with the ranks that did not)."""
    if not spec.topology.is_local:
        return ["check that every missing host accepts ssh from here (`allrun -H HOSTS hostname`) "
                f"and can reach the controller at {controller_ip} (no firewall between them)"]
    cores = len(usable_cpus())
    if spec.np > cores:
        return [f"fewer ranks (-np): {spec.np} ranks on {cores} cores start slowly, "
                "and a busy machine slower still"]
    return ["`%mpirun --restart` to try again; a rank that logged nothing stopped before its "
            "engine started (its Python's start-up: imports, sitecustomize, file system)"]
