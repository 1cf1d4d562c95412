"""Start and stop the processes of a World: one ipyparallel controller, the engines.

We launch ipyparallel's own controller and engine programs, but manage the processes
ourselves rather than through ``ipyparallel.Cluster``: the engines (through the job's
mpiexec, with flavour-specific flags) start at the same time as the controller instead of
after it, and every process lives in a process group we own, so stopping leaves nothing behind.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

import psutil

from mlp_magic.agent.leftovers import end_groups, own_groups
from mlp_magic.machine.deadline import until
from mlp_magic.core.proc_stat import process_id, start_time
from mlp_magic.engine.identity import PROGRAM as ENGINE_PROGRAM
from mlp_magic.engine.private_files import open_private
from mlp_magic.errors import MlpMagicError
from mlp_magic.world import published


def _tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:]).strip()
    except OSError:
        return ""


class ManagedProcess:
    """A child in its own session (process group), output to a log file (0600). ``umask``: the
    child's (the controller's 0o077 makes every file it writes private: its connection files hold
    the World's key); None keeps the kernel's (the ranks run the user's code, which writes with
    the user's umask)."""

    def __init__(self, argv: list, log_path: str, env: dict | None = None, name: str = "",
                 umask: int | None = None):
        self.name = name or os.path.basename(argv[0])
        self.log_path = log_path
        self._log = open_private(log_path, "ab")
        try:
            self.popen = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True, umask=-1 if umask is None else umask,
            )
        except OSError as err:
            raise MlpMagicError(f"cannot start {self.name} ({argv[0]}): {err}") from None
        finally:
            self._log.close()  # the child has its own copy

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def create_time(self) -> float | None:
        """With the pid, identifies this process for good (pids are reused)."""
        try:
            return psutil.Process(self.popen.pid).create_time()
        except psutil.Error:
            return None

    def running(self) -> bool:
        return self.popen.poll() is None

    def failure(self) -> str:
        """One message: how it ended and the end of its log."""
        tail = _tail(self.log_path)
        return f"{self.name} exited with status {self.popen.returncode}" + (f":\n{tail}" if tail else "")

    def stop(self, grace: float = 3.0) -> None:
        """Stop the process and every descendant, TERM first, KILL after ``grace`` seconds.

        The whole tree, not just the process group: OpenMPI starts each rank in a session of
        its own, and each engine's nanny in another.
        """
        family = self._family()
        self._signal_group(signal.SIGTERM)
        for member in family:
            _signal(member, signal.SIGTERM)
        _, alive = psutil.wait_procs(family, timeout=grace)
        self._signal_group(signal.SIGKILL)
        for member in alive:
            _signal(member, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=grace)
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:   # killed, not yet dead (its memory still being freed)
            _reap_later(self.popen)

    def _family(self) -> list:
        try:
            leader = psutil.Process(self.popen.pid)
            return [leader] + leader.children(recursive=True)
        except psutil.Error:
            return []

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _reap_later(popen: subprocess.Popen) -> None:
    """Collect a killed child's exit whenever it comes, so it never stays a zombie of the kernel."""
    threading.Thread(target=popen.wait, name="mlp-reaper", daemon=True).start()


def kill_tree(pid, create_time, grace: float = 3.0) -> int:
    """Terminate a process we once started, and its descendants; only if it is still the same
    process (same create time). Returns how many processes were signalled."""
    return kill_trees([(pid, create_time)], grace)


def kill_trees(processes, grace: float = 3.0) -> int:
    """``kill_tree`` of each (pid, create time) at once: TERM to all, one wait, KILL to what is
    left (an engine blocked in a send never acts on TERM). Returns how many were signalled."""
    members = trees(processes)
    for member in members:
        _signal(member, signal.SIGTERM)
    _, alive = psutil.wait_procs(members, timeout=grace)
    for member in alive:
        _signal(member, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=grace)
    return len(members)


def trees(processes) -> list:
    """The live processes of each (pid, create time) whose start time matches, with their
    descendants (psutil.Process each, once)."""
    family: dict = {}
    for pid, create_time in processes:
        pid, started = process_id(pid), start_time(create_time)   # as a record may hold them
        if pid is None or started is None:
            continue
        try:
            leader = psutil.Process(pid)
            if abs(leader.create_time() - started) > 0.01:
                continue
            family.update((p.pid, p) for p in [leader] + leader.children(recursive=True) if _alive(p))
        except psutil.Error:
            continue
    return list(family.values())


def _alive(process) -> bool:
    """Zombies are dead already: one whose parent (a killed kernel) never reaped it is not ours to stop."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal(process, sig: int) -> None:
    try:
        process.send_signal(sig)
    except psutil.Error:
        pass


HEARTBEAT_MS = 500  # registration completes on the first heartbeat after it: short starts sooner


def start_controller(workdir: str, ip: str, cluster_id: str, patience_s: float, curve: bool = False) -> tuple:
    """Start ipcontroller; return (process, engine connection file, client connection file).
    ``curve``: CurveZMQ on every socket (ipyparallel's own: the controller makes its key pair and
    writes only its public key in the connection files, each engine and client makes its own).

    ``patience_s`` is how long it keeps an engine that registered but has not beaten yet, and
    how long a silent heart may stay silent: under a start's CPU storm an engine can take tens of
    seconds between its registration and its first heartbeat (it builds its IPython shell in
    between), and ipyparallel's defaults (30 s, 10 s) drop it. The kernel's own start deadline
    decides instead; after the start, a dead rank is seen through its launcher, not its heart.
    """
    profile_dir = os.path.join(workdir, "profile")
    argv = [
        sys.executable, "-m", "ipyparallel.controller",
        f"--ip={ip}", f"--profile-dir={profile_dir}", f"--cluster-id={cluster_id}",
        "--log-level=WARN", f"--ping={HEARTBEAT_MS}",
        f"--IPController.registration_timeout={math.ceil(patience_s)}",
        f"--HeartMonitor.max_heartmonitor_misses={_beats(patience_s)}",
        "--usethreads",  # schedulers as threads: 8 fewer Python processes to start
        "--nodb",  # results live in the kernel (and our logs), not a second time in the controller
        # One broadcast scheduler, not ipyparallel's default tree of three (depth 1): in one
        # process (--usethreads) the tree spreads nothing, it only handles every request and reply
        # twice (docs/performance.md).
        "--IPController.broadcast_scheduler_depth=0",
    ] + (["--IPController.enable_curve=True"] if curve else [])
    process = ManagedProcess(argv, os.path.join(workdir, "controller.log"), name="ipcontroller", umask=0o077)
    security = os.path.join(profile_dir, "security")
    base = f"ipcontroller-{cluster_id}"
    engine_file = os.path.join(security, f"{base}-engine.json")
    return process, engine_file, os.path.join(security, f"{base}-client.json")


def _beats(seconds: float, period_ms: float = HEARTBEAT_MS) -> int:
    return max(20, math.ceil(seconds * 1000 / period_ms))


def wait_for_file(path: str, process: ManagedProcess, timeout: float) -> dict:
    """Wait until ``path`` holds complete JSON, failing fast if ``process`` dies. Nothing announces
    the file (inotify is not in the standard library): machine/deadline.until looks again."""
    found: list = []

    def complete() -> bool:
        if os.path.exists(path):
            try:
                with open(path) as handle:
                    found.append(json.load(handle))
                return True
            except ValueError:
                pass  # being written
        if not process.running():
            raise MlpMagicError(process.failure())
        return False

    if until(complete, time.monotonic() + timeout, first_s=0.005, longest_s=0.02):
        return found[0]
    raise MlpMagicError(f"{process.name} did not write {path} within {timeout:.0f} s; "
                        f"log: {process.log_path}")


def relay_when_complete(path: str, process: ManagedProcess, timeout: float) -> str:
    """A path the engines may read the moment it exists: ``path``'s content, once complete.

    ipyparallel's controller writes its connection file in place, and an engine waiting for it
    reads it as soon as it appears: half a file is a JSON error and a rank that exits with
    status 1 before it logs anything (seen in CI, once in hundreds of starts). A thread waits for
    the whole file and renames a private copy into place; if the controller fails first, no
    copy appears and the start reports the controller's failure."""
    relay = path[:-len(".json")] + "-whole.json" if path.endswith(".json") else path + ".whole"

    def copy() -> None:
        try:
            info = wait_for_file(path, process, timeout)
        except MlpMagicError:
            return
        partial = relay + ".partial"
        with open_private(partial) as handle:
            json.dump(info, handle)
        os.replace(partial, relay)

    threading.Thread(target=copy, name="mlp-connection-relay", daemon=True).start()
    return relay


def engine_command(url_file: str | None, patience_s: float) -> list:
    """One rank's program (``engine.main``: ipyparallel's engine under the rank's own id).

    No nanny: it is a second Python process per rank (a large share of a rank's start-up CPU and
    memory: docs/performance.md) whose jobs we do otherwise: interrupts go to the engine's control
    thread, and a dead rank is reported by its launcher. The engine waits for the controller's
    registration reply, and tolerates missed heartbeats, for as long as the start may take.
    """
    argv = [sys.executable, "-m", ENGINE_PROGRAM, "--log-level=WARN",
            "--IPEngine.wait_for_url_file=60", "--IPEngine.enable_nanny=False",
            f"--IPEngine.timeout={math.ceil(patience_s)}",
            # an engine checks for the controller's pings every period + 500 ms
            f"--IPEngine.max_heartbeat_misses={_beats(patience_s, HEARTBEAT_MS + 500)}"]
    if url_file:
        argv.append(f"--file={url_file}")
    return argv


def stop_recorded(record: dict) -> int:
    """Stop every process a World's record names that runs on this machine: its controller, its
    launcher and the ranks that outlived the launcher (in sessions of their own, nobody's children
    then), all at once. Each is checked by pid and start time, so a reused pid is never touched;
    the ranks are not filtered by host (a hostfile may name this machine by an address), and a
    rank elsewhere that matched both here would be one of this World's own processes, started in
    the same instant. How many were signalled."""
    killed = kill_trees(recorded_trees(record))
    return killed + len(end_groups(led_groups(record)))


def recorded_trees(record: dict) -> list:
    """(pid, start time) of the World's own processes and its ranks, as its record names them."""
    return published.recorded_processes(record) + list(published.recorded_ranks(record).values())


def led_groups(record: dict) -> set:
    """The groups and sessions the record's ranks and own processes lead (agent/leftovers)."""
    ranks, groups = published.recorded_ranks(record), published.recorded_groups(record)
    own = published.recorded_processes(record)
    return own_groups([dict(groups.get(rank, {}), pid=pid, create_time=started)
                       for rank, (pid, started) in ranks.items()] + sessions_of(own))


def sessions_of(own: list) -> list:
    """The World's own processes (pid, start time) as leaders of their sessions (ManagedProcess):
    what a killed controller left there (its scheduler) is found by the session's number."""
    return [{"pid": pid, "create_time": started, "sid": pid} for pid, started in own]


def stop_ranks(ranks: list) -> int:
    """Stop ranks on this machine ({pid, create_time, pgid, sid}: what engine/identity reported)
    that outlived their launcher, and whatever they left in their groups. How many were signalled."""
    killed = kill_trees([(rank.get("pid"), rank.get("create_time")) for rank in ranks if rank.get("pid")])
    return killed + len(end_leftovers(ranks))


def end_leftovers(ranks: list) -> list:
    """The processes the ranks left in their groups (a child made with ``os.fork``: init's now,
    deaf to SIGTERM), stopped; their pids."""
    return end_groups(own_groups(ranks))


def reap_orphans(notice=print) -> None:
    """Stop the Worlds of kernels that died without stopping them (a stale World from a dead
    kernel): their processes outlive them in sessions of their own."""
    for state in published.orphaned_worlds():
        killed = stop_recorded(state)
        published.withdraw(state["pid"])
        if killed:
            notice(f"mlp_magic: stopped {killed} processes left by a dead kernel (pid {state['pid']})")
