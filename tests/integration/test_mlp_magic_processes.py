"""``mlp-magic``'s own processes: stopped by Ctrl-C or SIGTERM while its hosts' ssh clients run
(stacks, topo --host, and status's collector), bounded in number, never dumped as a job's. The
real console script, real child processes. The ssh client is a stand-in that never connects (it
sleeps, as a client waiting on a silent host does), so the hosts are documentation addresses
that nothing is ever sent to (status's own port probe, which would, is left out)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.timing import hang_bound

from tests.integration.test_allrun_local import local_env, processes_running, wait_gone

HOSTS = "192.0.2.1,192.0.2.2"   # TEST-NET-1: the stand-in client never reaches for them
# `mlp-magic status` is its collector plus printing; run here without its TCP probe of each
# host's ssh port (traffic to the hosts), as the console script would run it.
STATUS_COLLECTOR = f"""
import sys
from mlp_magic.cli import PROG
from mlp_magic.cluster.collect import CollectOptions, StateCollector
from mlp_magic.ssh.interrupts import terminate_as_interrupt
terminate_as_interrupt()
try:
    StateCollector(CollectOptions(hosts={HOSTS!r}, reach_timeout=None, timeout=60))()
except KeyboardInterrupt:
    print(PROG + ": interrupted", file=sys.stderr)
    sys.exit(130)
"""
COMMANDS = {"stacks": (["stacks", "-H", HOSTS, "--timeout", "60"], 2),
            "status": (["-c", STATUS_COLLECTOR], 2),
            "topo": (["topo", "--host", "192.0.2.1", "--timeout", "60"], 1)}


def console_script() -> list:
    script = os.path.join(os.path.dirname(sys.executable), "mlp-magic")
    return [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "mlp_magic.cli"]


def command_line(args: list) -> list:
    return [sys.executable, *args] if args[0] == "-c" else [*console_script(), *args]


def stand_in(folder, name: str, sleep: str) -> str:
    """A program that only sleeps (``sleep`` is its command line once started): an ssh client
    waiting on a silent host, a py-spy that never answers."""
    path = folder / name
    path.write_text(f"#!/bin/sh\nexec {sleep}\n")
    path.chmod(0o755)
    return str(path)


def signal_once_started(proc, sleep: str, count: int, sig, later: float = 0.0):
    """Once ``count`` stand-ins run, wait ``later`` s and send ``sig`` to the command; its
    (exit status, stderr) and the stand-ins left running (killed here, after the look)."""
    try:
        deadline = time.monotonic() + 30
        while len(processes_running(sleep)) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(processes_running(sleep)) == count, "the stand-ins did not start"
        time.sleep(later)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        left = wait_gone(sleep, hang_bound(0.5))
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    return proc.returncode, err, left


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("later", [0.0, 0.4])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_stopped_command_leaves_no_ssh_client_running(tmp_path, name, sig, later):
    """Its ssh clients are stopped before it exits: exit 130, one line, nothing left behind.
    (Before: the clients ran on, orphaned, until their own end; a Ctrl-C that interrupted the
    wait on the ssh thread made that thread look finished, status waited on its ssh from a
    thread nobody stopped, and SIGTERM was not handled.)"""
    args, clients = COMMANDS[name]
    sleep = f"sleep {100 + list(COMMANDS).index(name) + later + (0.01 if sig == signal.SIGTERM else 0):.2f}"
    client = stand_in(tmp_path, "ssh", sleep)
    proc = subprocess.Popen(command_line(args), env=local_env(MLP_MAGIC_SSH=client),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    code, err, left = signal_once_started(proc, sleep, clients, sig, later)
    assert left == [], f"ssh clients left running after {signal.Signals(sig).name}"
    assert code == 130 and err == "mlp-magic: interrupted\n", (code, err)


@pytest.mark.parametrize("name", ["stacks", "topo"])
def test_silent_hosts_at_the_deadline_leave_no_ssh_client_running(tmp_path, name):
    """The deadline passes with every host silent: the command says so and exits, its ssh
    clients stopped first (before: ``topo --host`` left its client running; status's collector
    waits past its GPU deadline anyway)."""
    args, _ = COMMANDS[name]
    sleep = f"sleep {96 + list(COMMANDS).index(name) * 0.25:.2f}"
    client = stand_in(tmp_path, "ssh", sleep)
    done = subprocess.run([*console_script(), *args[:-1], "1"], env=local_env(MLP_MAGIC_SSH=client),
                          capture_output=True, text=True, timeout=60)
    left = processes_running(sleep)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"{name}: ssh clients left running after the deadline"
    assert done.returncode == 1 and "no answer within 1 s" in done.stdout + done.stderr, done


def test_many_hosts_are_asked_a_bounded_number_at_a_time_within_the_deadline(tmp_path):
    """300 silent hosts: at most stacks' AT_ONCE ssh clients at a time, the whole call within its
    --timeout (plus the second of slack), every host listed. (Before: every client started at
    once, each start slower than the last, and 2,000 hosts took 8 s of a 2 s timeout.)"""
    from mlp_magic.stacks.collect import AT_ONCE

    sleep = "sleep 99.75"
    client = stand_in(tmp_path, "ssh", sleep)
    started = time.monotonic()
    proc = subprocess.Popen([*console_script(), "stacks", "-H", "192.0.2.[1-250],198.51.100.[1-50]",
                             "--timeout", "2"], env=local_env(MLP_MAGIC_SSH=client),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    most = 0
    try:
        while proc.poll() is None and time.monotonic() - started < 30:
            most = max(most, len(processes_running(sleep)))
            time.sleep(0.05)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in wait_gone(sleep, 5.0):
            os.kill(pid, signal.SIGKILL)
    took = time.monotonic() - started
    assert proc.returncode == 1, err
    assert out.count(": timeout: no answer within 2 s") == 300, out[-500:]
    assert 0 < most <= AT_ONCE < 300
    # a hang guard only: how far past --timeout the call ends is benchmarks/stacks_deadline.py's
    assert took < hang_bound(2 + 1 + 1), f"{took:.1f} s for a 2 s timeout"


def test_match_never_dumps_the_stacks_command_or_its_scanner(tmp_path):
    """A pattern that matches a stacks command's own line and another host's scanner running on
    this machine (both reached over ssh): neither is a process to dump. A Python process whose
    line merely names the scanner's module is one."""
    from mlp_magic.stacks.collect import scan_command
    from mlp_magic.commands.pure.table import STACKS, options_for

    sleep = "sleep 98.25"
    client = stand_in(tmp_path, "ssh", sleep)
    stuck = stand_in(tmp_path, "py-spy", "sleep 98.5")   # keeps the other scanner waiting
    pattern = r"stacks -H 192\.0\.2\.1,|mlp_magic\.stacks\.scan"   # not the test run's own line
    command = [*console_script(), "stacks", "-H", HOSTS, "--timeout", "60", "--match", pattern]
    waiting = subprocess.Popen(command, env=local_env(MLP_MAGIC_SSH=client), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    other = subprocess.Popen(scan_command(options_for(STACKS, pids=[waiting.pid], timeout=60.0), pyspy=stuck),
                             shell=True, stdout=subprocess.DEVNULL)
    named = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # mlp_magic.stacks.scan"])
    try:
        deadline = time.monotonic() + 30
        while not (len(processes_running(sleep)) == 2 and processes_running("sleep 98.5")):
            assert time.monotonic() < deadline, "the command and the other scanner did not start"
            time.sleep(0.01)
        scanner = scan_command(options_for(STACKS, match=pattern, timeout=10.0))
        done = subprocess.run(scanner, shell=True, capture_output=True, text=True, timeout=60)
    finally:
        waiting.send_signal(signal.SIGINT)
        waiting.communicate(timeout=20)
        for process in (other, named):
            process.kill()
            process.wait()
        for pid in processes_running("sleep 98.5"):
            os.kill(pid, signal.SIGKILL)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert "scan" in lines[0], done.stderr
    assert [line["pid"] for line in lines[1:]] == [named.pid], lines[1:]


@pytest.mark.parametrize("command", [
    ["mlp-magic", "stacks", "--json"], ["mlp-magic", "stacks"], ["mlp-magic", "status"],
    ["mlp-magic", "topo"], ["allrun", "echo", "hi"]], ids=" ".join)
def test_output_that_cannot_be_written_is_one_line(command):
    """A full disk (``>/dev/full``): one line naming why, exit 1, no traceback; a reader that
    left (``| head``) says nothing."""
    program = os.path.join(os.path.dirname(sys.executable), command[0])
    with open("/dev/full", "w") as full:
        done = subprocess.run([program, *command[1:]], env=local_env(), stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert f"{command[0]}: cannot write: No space left on device\n" in done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    reader = subprocess.Popen([program, *command[1:]], env=local_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    reader.stdout.close()   # gone before anything was written
    _, err = reader.communicate(timeout=120)
    assert b"Traceback" not in err and b"cannot write" not in err, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stopped_stacks_command_leaves_no_py_spy_running_here(tmp_path, sig):
    """This machine is scanned in-process: the py-spys still reading processes when the command
    is stopped are killed with it, and no more start (a py-spy holds its target stopped while it
    reads). 24 targets: more than the 16 py-spys that run at once."""
    from mlp_magic.stacks.scan import PARALLEL

    sleep = f"sleep {97.5 + (0.01 if sig == signal.SIGTERM else 0):.2f}"
    stand_in(tmp_path, "py-spy", sleep)   # first on PATH: a py-spy that never answers
    targets = [subprocess.Popen(["sleep", "95.5"]) for _ in range(PARALLEL + 8)]
    try:
        env = local_env(PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
        pids = ",".join(str(t.pid) for t in targets)
        proc = subprocess.Popen([*console_script(), "stacks", "--pid", pids, "--timeout", "60"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        code, err, left = signal_once_started(proc, sleep, PARALLEL, sig)
    finally:
        for target in targets:
            target.kill()
            target.wait()
    assert left == [], "py-spy left running"
    assert code == 130 and err == "mlp-magic: interrupted\n", (code, err)
