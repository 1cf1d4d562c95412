"""Collect every rank's Python stack, even while it is blocked inside a C call.

Each engine registered faulthandler on SIGUSR1, writing all its threads to its own stacks file
(see engine_side). To take a snapshot we empty that file, signal the engine and read the file
back: in-process for ranks on this machine; for the others, one command for all their hosts
over ssh (fanout/hosts), each host doing its own part.
The engine's event loop is not involved, so a rank stuck in MPI_Barrier or a gloo collective
still answers.
"""
from __future__ import annotations

import os
import shlex
import signal
import socket
import time
from typing import NamedTuple

from mlp_magic.machine.deadline import until
from mlp_magic.core.host_command import HOST
from mlp_magic.core.results import why_no_answer
from mlp_magic.stacks import collectives
from mlp_magic.stacks.pure.collectives import section
from mlp_magic.stacks.pure.frames import rank_frames, user_line
from mlp_magic.errors import MlpMagicError
from mlp_magic.engine.identity import PROGRAM as ENGINE_PROGRAM
from mlp_magic.output import display, logs

SETTLE_SECONDS = 0.05   # a dump is complete once its file stops growing for this long
MARK = "@@mlp_magic-stack "
REMOTE_SLACK = 15.0     # beyond the dumps' own wait, for the ssh connections and the transfer
CONNECT_SECONDS = 5.0
AT_ONCE = 64            # hosts asked at once (the others as those end, inside the same deadline)


class Target(NamedTuple):
    """A rank to ask: its process and the files it answers in (stacks; collectives, None for an
    engine that names none)."""
    rank: int
    pid: int
    stacks: str
    collectives: str | None = None


def _read_when_settled(paths: list, deadline: float) -> dict:
    """Every dump file's text once all have stopped growing for ``SETTLE_SECONDS`` (or at the
    deadline). faulthandler writes a dump in many small writes and tells no one when it is done,
    and a file's growth announces nothing (no inotify in the standard library): machine/deadline.until
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


def _local_snapshot(targets: list, wait: float, create_times: dict) -> tuple:
    """targets: [Target] on this machine -> ({rank: dump text}, {rank: collectives or None}).
    The collectives are asked once the stacks are written: faulthandler writes one dump at a
    time per process and skips a second one that starts meanwhile."""
    live = [t for t in targets if _same_process(t.pid, create_times.get(t.rank))]
    for target in live:   # the others are gone: their dumps stay empty and are reported as such
        try:
            os.truncate(target.stacks, 0)
            os.kill(target.pid, signal.SIGUSR1)
        except OSError:
            pass
    texts = _read_when_settled([target.stacks for target in targets], time.monotonic() + wait)
    said = collectives.gather({t.rank: (t.pid, t.collectives) for t in live if t.collectives}, wait)
    return {t.rank: texts[t.stacks] for t in targets}, {t.rank: said.get(t.rank) for t in targets}


def remote_script(by_host: dict, wait: float) -> str:
    """One shell script for every host ({host: [Target]}): each runs its own part, found by the
    host name allrun's runner exports (core/host_command.HOST)."""
    parts = " ".join(f"{shlex.quote(host)}) {_host_steps(targets, wait)};;"
                     for host, targets in by_host.items())
    return f'case "${HOST}" in {parts} esac'


def _host_steps(targets: list, wait: float) -> str:
    """One host's part: empty the stacks files, signal, wait until written; then ask the
    collectives (after the stacks: faulthandler writes one dump at a time per process), again
    where no answer came soon; print everything."""
    steps, written, asks, answered, again = [], [], [], [], []
    for index, target in enumerate(targets):
        pid, path = int(target.pid), shlex.quote(target.stacks)
        # Only a live engine of ours gets SIGUSR1 (its default action would kill a stranger).
        steps.append(f": > {path}; grep -qsF {ENGINE_PROGRAM} /proc/{pid}/cmdline "
                     f"&& kill -USR1 {pid} 2>/dev/null")
        written.append(f"[ -s {path} ]")
        if target.collectives:
            flag = f"asked{index}"
            asks.append(collectives.shell_ask(pid, target.collectives, flag, ENGINE_PROGRAM) + " || :")
            answered.append(collectives.shell_ready(target.collectives, flag))
            again.append(collectives.shell_again(pid, target.collectives, flag))
    steps.append(_shell_wait(written, max(1, int(wait / 0.1))) + "; sleep 0.1")
    if asks:
        rounds = max(1, int(wait / 0.1))
        again_at = max(1, int(collectives.AGAIN_AFTER_S / 0.1))
        steps += asks + [_shell_wait(answered, rounds, f"[ $((i % {again_at})) = {again_at - 1} ] && "
                                                       f"{{ {'; '.join(again)}; }}; ")]
    for target in targets:
        steps.append(f"echo '{MARK}{int(target.rank)}'; cat {shlex.quote(target.stacks)} 2>/dev/null")
        if target.collectives:
            steps.append(collectives.shell_print(target.rank, target.collectives))
    return "; ".join(steps)


def _shell_wait(tests: list, rounds: int, meanwhile: str = "") -> str:
    """Up to ``rounds`` tenths of a second until every test holds, running ``meanwhile``
    between looks."""
    return (f"i=0; while [ $i -lt {rounds} ]; do {' && '.join(tests)} && break; "
            f"{meanwhile}sleep 0.1; i=$((i+1)); done")


def split_remote_output(text: str) -> tuple:
    """({rank: dump text}, {rank: collectives or None}) from the script's output."""
    parts: dict = {}
    key, lines = None, []
    for line in text.splitlines():
        for mark, kind in ((MARK, "stacks"), (collectives.MARK, "collectives")):
            if line.startswith(mark) and line[len(mark):].isdigit():
                if key is not None:
                    parts[key] = lines
                key, lines = (kind, int(line[len(mark):])), []
                break
        else:
            if key is not None:
                lines.append(line)
    if key is not None:
        parts[key] = lines
    dumps = {rank: "\n".join(lines) + "\n" for (kind, rank), lines in parts.items() if kind == "stacks"}
    answers = {rank: collectives.parse_printed(lines) for (kind, rank), lines in parts.items()
               if kind == "collectives"}
    return dumps, answers


def _start_remote(by_host: dict, wait: float):
    """Start every host's part over ssh (fanout/hosts: every host named, none split off as this
    machine's: the ranks here were told apart by their identity), in the background: a function
    that gives ({rank: dump text}, {rank: collectives}) once they answered (or could not)."""
    from mlp_magic.fanout.hosts import start
    from mlp_magic.fanout.transports import Shell

    timeout = wait + REMOTE_SLACK
    try:
        # no ControlMaster: a hang report is one call, and leaves no ssh session on the hosts
        ssh = Shell(connect_timeout=CONNECT_SECONDS, reuse=False, at_once=AT_ONCE)
    except MlpMagicError as err:   # no ssh client, or an $MLP_MAGIC_SSH that cannot be split
        why = {host: str(err) for host in by_host}
        return lambda: _unanswered(by_host, why)
    fan = start(list(by_host), remote_script(by_host, wait), timeout=timeout, there=ssh)

    def finish() -> tuple:
        dumps, answers = {}, {}
        for host, result in fan.finish(time.monotonic() + timeout + CONNECT_SECONDS).items():
            found, said = split_remote_output(result.stdout)
            why = why_no_answer(result, timeout) or "no dump"
            for target in by_host[host]:
                dumps[target.rank] = found.get(target.rank, f"(no dump from {host}: {why})\n")
                answers[target.rank] = said.get(target.rank)
        return dumps, answers

    return finish


def _unanswered(by_host: dict, why: dict) -> tuple:
    targets = [(host, target) for host, mine in by_host.items() for target in mine]
    return ({t.rank: f"(no dump from {host}: {why[host]})\n" for host, t in targets},
            {t.rank: None for _, t in targets})


def collect(world, ranks: list, wait: float = 1.5, with_collectives: bool = True) -> tuple:
    """({rank: faulthandler dump text}, {rank: collectives or None}) for ``ranks`` of ``world``
    (without ``with_collectives``: the stacks only, as benchmarks/collectives.py compares)."""
    here = socket.gethostname()
    local, remote = [], {}
    for rank in ranks:
        identity = world.identities[rank]
        answers_in = identity.get("collectives_path") if with_collectives else None
        target = Target(rank, identity["pid"], identity["stacks_path"], answers_in)
        if identity["host"] == here:
            local.append(target)
        else:
            remote.setdefault(world.host_of(rank), []).append(target)
    finish = _start_remote(remote, wait) if remote else (lambda: ({}, {}))
    dumps, answers = {}, {}
    if local:
        create_times = {t.rank: world.identities[t.rank].get("create_time") for t in local}
        for found, into in zip(_local_snapshot(local, wait, create_times), (dumps, answers)):
            into.update(found)
    for found, into in zip(finish(), (dumps, answers)):
        into.update(found)
    return dumps, answers


def stack_snapshot(world, ranks: list, log_dir: str | None = None) -> tuple:
    """Collect, save and render every rank's stack, merged into one tree, and the collectives
    each rank is in: (text, html)."""
    dumps, answers = collect(world, ranks)
    if log_dir:
        logs.write_stacks(log_dir, dumps)
    stacks = {r: rank_frames(dumps.get(r, "")) for r in ranks}
    lines = section({r: answers.get(r) for r in ranks}, {r: user_line(stacks[r]) for r in ranks})
    where = f"full dumps: {os.path.join(log_dir, 'stacks')}" if log_dir else ""
    return display.stack_report(stacks, {r: world.host_of(r) for r in ranks}, where, lines)
