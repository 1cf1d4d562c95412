"""Collect every rank's Python stack, even while it is blocked inside a C call.

Each engine registered faulthandler on SIGUSR1, writing all its threads to its own stacks file
(see engine_side). To take a snapshot we empty that file, signal the engine and read the file
back: in-process for ranks on this machine; for the others, one command for all their hosts
through allrun's ssh runner (ssh/runner), each host doing its own part.
The engine's event loop is not involved, so a rank stuck in MPI_Barrier or a gloo collective
still answers.
"""
from __future__ import annotations

import os
import shlex
import signal
import socket
import time

from mlp_magic import config
from mlp_magic.core.deadline import until
from mlp_magic.core.host_command import HOST
from mlp_magic.core.results import why_no_answer
from mlp_magic.stacks.pure.frames import rank_frames
from mlp_magic.errors import MlpMagicError
from mlp_magic.engine.main import PROGRAM as ENGINE_PROGRAM
from mlp_magic.output import display, logs

SETTLE_SECONDS = 0.05   # a dump is complete once its file stops growing for this long
MARK = "@@mlp_magic-stack "
REMOTE_SLACK = 15.0     # beyond the dumps' own wait, for the ssh connections and the transfer
CONNECT_SECONDS = 5.0
AT_ONCE = 64            # hosts asked at once (the others as those end, inside the same deadline)


def _read_when_settled(paths: list, deadline: float) -> dict:
    """Every dump file's text once all have stopped growing for ``SETTLE_SECONDS`` (or at the
    deadline). faulthandler writes a dump in many small writes and tells no one when it is done,
    and a file's growth announces nothing (no inotify in the standard library): core/deadline.until
    compares the sizes at that steady pace."""
    sizes: dict = {path: -1 for path in paths}

    def settled() -> bool:
        current = {p: os.path.getsize(p) if os.path.exists(p) else 0 for p in paths}
        done = all(current.values()) and current == sizes
        sizes.update(current)
        return done

    until(settled, deadline, first_s=SETTLE_SECONDS, longest_s=SETTLE_SECONDS)
    texts = {}
    for path in paths:
        try:
            with open(path, errors="replace") as handle:
                texts[path] = handle.read()
        except OSError:
            texts[path] = ""
    return texts


def _same_process(pid: int, create_time) -> bool:
    """SIGUSR1's default action kills: only signal the engine we started, never a reused pid."""
    try:
        import psutil

        return create_time is None or abs(psutil.Process(pid).create_time() - create_time) < 0.01
    except Exception:
        return False


def _local_snapshot(targets: list, wait: float, create_times: dict) -> dict:
    """targets: [(rank, pid, path)] on this machine -> {rank: dump text}."""
    for rank, pid, path in targets:
        if not _same_process(pid, create_times.get(rank)):
            continue  # gone: its dump stays empty and is reported as such
        try:
            os.truncate(path, 0)
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            pass
    texts = _read_when_settled([path for _, _, path in targets], time.monotonic() + wait)
    return {rank: texts[path] for rank, _, path in targets}


def remote_script(by_host: dict, wait: float) -> str:
    """One shell script for every host ({host: [(rank, pid, path)]}): each runs its own part,
    found by the host name allrun's runner exports (core/host_command.HOST)."""
    parts = " ".join(f"{shlex.quote(host)}) {_host_steps(targets, wait)};;"
                     for host, targets in by_host.items())
    return f'case "${HOST}" in {parts} esac'


def _host_steps(targets: list, wait: float) -> str:
    """One host's part: empty the files, signal, wait until written, print them."""
    steps = []
    for _, pid, path in targets:
        # Only a live engine of ours gets SIGUSR1 (its default action would kill a stranger).
        steps.append(f": > {shlex.quote(path)}; grep -qsF {ENGINE_PROGRAM} /proc/{int(pid)}/cmdline "
                     f"&& kill -USR1 {int(pid)} 2>/dev/null")
    rounds = max(1, int(wait / 0.1))
    files = " ".join(shlex.quote(p) for _, _, p in targets)
    steps.append(f"i=0; while [ $i -lt {rounds} ]; do ok=1; "
                 f"for f in {files}; do [ -s \"$f\" ] || ok=0; done; "
                 f"[ $ok = 1 ] && break; sleep 0.1; i=$((i+1)); done; sleep 0.1")
    for rank, _, path in targets:
        steps.append(f"echo '{MARK}{int(rank)}'; cat {shlex.quote(path)} 2>/dev/null")
    return "; ".join(steps)


def split_remote_output(text: str) -> dict:
    dumps, rank, lines = {}, None, []
    for line in text.splitlines():
        if line.startswith(MARK):
            if rank is not None:
                dumps[rank] = "\n".join(lines) + "\n"
            rank, lines = int(line[len(MARK):]), []
        elif rank is not None:
            lines.append(line)
    if rank is not None:
        dumps[rank] = "\n".join(lines) + "\n"
    return dumps


def _start_remote(by_host: dict, wait: float):
    """Start every host's part through the ssh runner, in the background: a function that gives
    {rank: dump text} once they answered (or could not)."""
    from mlp_magic.ssh.argv import NO_REUSE
    from mlp_magic.ssh.runner import BackgroundRun, HostRunner, RunOptions

    timeout = wait + REMOTE_SLACK
    try:
        # no ControlMaster: a hang report is one call, and leaves no ssh session on the hosts
        options = RunOptions(ssh=config.ssh_command(), fanout=AT_ONCE, timeout=timeout, local=False,
                             connect_timeout=CONNECT_SECONDS, control=NO_REUSE)
        runner = HostRunner(list(by_host), remote_script(by_host, wait), options)
    except MlpMagicError as err:   # no ssh client, or an $MLP_MAGIC_SSH that cannot be split
        why = {host: str(err) for host in by_host}
        return lambda: _unanswered(by_host, why)
    pending = BackgroundRun(runner, "mlp-stack-snapshot")

    def finish() -> dict:
        pending.wait(time.monotonic() + timeout + CONNECT_SECONDS)
        if pending.error is not None:
            return _unanswered(by_host, {host: f"ssh transport: {pending.error}" for host in by_host})
        dumps = {}
        for result in runner.results:
            found = split_remote_output(result.stdout)
            why = why_no_answer(result, timeout) or "no dump"
            dumps.update({rank: found.get(rank, f"(no dump from {result.host}: {why})\n")
                          for rank, _, _ in by_host[result.host]})
        return dumps

    return finish


def _unanswered(by_host: dict, why: dict) -> dict:
    return {rank: f"(no dump from {host}: {why[host]})\n" for host, targets in by_host.items()
            for rank, _, _ in targets}


def collect(world, ranks: list, wait: float = 1.5) -> dict:
    """{rank: faulthandler dump text} for ``ranks`` of ``world``."""
    here = socket.gethostname()
    local, remote = [], {}
    for rank in ranks:
        identity = world.identities[rank]
        target = (rank, identity["pid"], identity["stacks_path"])
        if identity["host"] == here:
            local.append(target)
        else:
            remote.setdefault(world.host_of(rank), []).append(target)
    finish = _start_remote(remote, wait) if remote else dict
    dumps = {}
    if local:
        create_times = {rank: world.identities[rank].get("create_time") for rank, _, _ in local}
        dumps.update(_local_snapshot(local, wait, create_times))
    dumps.update(finish())
    return dumps


def stack_snapshot(world, ranks: list, log_dir: str | None = None) -> tuple:
    """Collect, save and render every rank's stack: (text, html), merged into one tree."""
    dumps = collect(world, ranks)
    if log_dir:
        logs.write_stacks(log_dir, dumps)
    stacks = {r: rank_frames(dumps.get(r, "")) for r in ranks}
    where = f"full dumps: {os.path.join(log_dir, 'stacks')}" if log_dir else ""
    return display.stack_report(stacks, {r: world.host_of(r) for r in ranks}, where)
