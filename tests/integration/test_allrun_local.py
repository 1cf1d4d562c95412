"""allrun on the embedded default (this machine as the only host, no ssh): the real console
script and the real transport, run as subprocesses, plus the notebook entry point."""
from __future__ import annotations

import asyncio
import json
import os
import re
import pty
import select
import signal
import subprocess
import sys
import time

import psutil
import pytest

from mlp_magic.errors import MlpMagicError
from mlp_magic.ssh.runner import HostRunner, RunOptions, run_on_hosts
from tests.procs import processes_running
from tests.timing import HANG_FLOOR_S, hang_bound


def local_env(**extra) -> dict:
    """No job variables: the topology is the local machine."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLP_", "SLURM_", "OMPI_", "PMI_", "AZ_BATCH"))
           and k not in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "NO_COLOR")}
    env.update(extra)
    return env


def allrun(*args, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "mlp_magic.allrun.command", *args], env=env or local_env(),
                          capture_output=True, text=True, timeout=timeout)


def wait_gone(command: str, seconds: float = HANG_FLOOR_S) -> list[int]:
    deadline = time.monotonic() + seconds
    while processes_running(command) and time.monotonic() < deadline:
        time.sleep(0.05)
    return processes_running(command)


def test_local_machine_runs_without_ssh():
    done = allrun("--json", "--ssh", "/nonexistent/ssh", "--", "echo out; echo err >&2; exit 4")
    assert done.returncode == 4
    [entry] = json.loads(done.stdout)
    assert entry["host"] == "localhost"
    assert (entry["status"], entry["exit_code"]) == ("failed", 4)
    assert (entry["stdout"], entry["stderr"]) == ("out\n", "err\n")


def test_a_process_left_in_the_background_is_not_waited_for():
    """As a terminal: the command's end is the end (it held allrun for the whole sleep)."""
    started = time.monotonic()
    done = allrun("--", "sh -c 'sleep 120 & echo $!'")
    took = time.monotonic() - started
    background = int(done.stdout.split("\n")[1])   # the pid it printed, under the host's header
    try:
        assert done.returncode == 0 and took < hang_bound(2.0), (took, done.stdout, done.stderr)
        assert "a process it left in the background still holds its output: not waited for" in done.stdout
        assert psutil.pid_exists(background)   # left running, as a terminal leaves it
    finally:
        os.kill(background, signal.SIGKILL)


def test_grouped_summary_and_footer():
    done = allrun("-H", "localhost", "--", "echo hello")
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["---------------- localhost (1) ----------------", "hello"]
    assert done.stderr.startswith("allrun: 1 host: 1 ok")


def test_bash_script_with_bashisms():
    done = allrun("--json", "--", 'a=(x y z); echo "${#a[@]}" $((6 * 7))')
    assert json.loads(done.stdout)[0]["stdout"] == "3 42\n"


def test_timeout_kills_the_whole_process_group():
    done = allrun("--json", "-t", "1", "--", "sleep 103.5 & sleep 103.6; wait")
    assert done.returncode == 255
    assert json.loads(done.stdout)[0]["status"] == "timeout"
    assert wait_gone("sleep 103.5") == [] and wait_gone("sleep 103.6") == []


def test_ctrl_c_returns_partial_output_and_stops_the_command():
    proc = subprocess.Popen([sys.executable, "-m", "mlp_magic.allrun.command", "--", "echo begun; sleep 104"],
                            env=local_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not processes_running("sleep 104") and time.monotonic() < deadline:
        time.sleep(0.05)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=15)
    assert time.monotonic() - sent < hang_bound(0.5)   # at once (the command sleeps 104 s)
    assert proc.returncode == 130
    assert "localhost (1) [interrupted]" in out and "begun" in out
    assert "not finished: localhost" in err
    assert wait_gone("sleep 104") == []


def installed_allrun() -> list:
    """The console script users run (installed next to this python), else ``python -m``."""
    script = os.path.join(os.path.dirname(sys.executable), "allrun")
    return [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "mlp_magic.allrun.command"]


def start_and_interrupt(command: str, when, again_after: float | None = None):
    """Start allrun, wait ``when()``, Ctrl-C; with ``again_after``, a second Ctrl-C if it still
    runs then (as a user would). Returns (process, stdout, stderr)."""
    proc = subprocess.Popen([*installed_allrun(), "--", command],
                            env=local_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    when()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=again_after or 15)
    except subprocess.TimeoutExpired:
        if again_after is None:
            raise
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    return proc, out, err


def test_ctrl_c_while_asyncio_is_still_imported_is_clean():
    """The command starts before asyncio is imported; a Ctrl-C right then must neither break
    the import in half nor leave the command running."""
    def as_soon_as_the_command_runs():
        deadline = time.monotonic() + 20
        while not processes_running("sleep 104.5") and time.monotonic() < deadline:
            time.sleep(0.001)
    proc, out, err = start_and_interrupt("echo begun; sleep 104.5", as_soon_as_the_command_runs)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert "localhost (1) [interrupted]" in out and "begun" in out
    assert wait_gone("sleep 104.5") == []


@pytest.mark.parametrize("after", [0.0, 0.01, 0.02, 0.03, 0.05])
def test_ctrl_c_at_any_moment_of_the_start_up_leaves_nothing_running(after):
    """Early enough, the Ctrl-C stops Python before any of our code runs (its own exit status
    and message); from then on, exit 130 without a traceback. Never a command left behind.
    (In the first milliseconds CPython itself may drop a Ctrl-C raised inside an import's
    weakref callback, before allrun can notice: then a second one stops it.)"""
    proc, out, err = start_and_interrupt("sleep 104.6", lambda: time.sleep(after), again_after=5)
    assert wait_gone("sleep 104.6") == [], (proc.returncode, err)
    if proc.returncode == 130:   # CPython's own word on the Ctrl-C it dropped is not ours to hide
        assert "Traceback" not in CPYTHON_DROPPED_CTRL_C.sub("", err), err


# What CPython prints (sys.unraisablehook) for a Ctrl-C raised inside an import's weakref callback:
# it drops it there, before any code of ours can run; a second Ctrl-C then stops the command.
CPYTHON_DROPPED_CTRL_C = re.compile(
    r"Exception ignored in: <function _get_module_lock\.<locals>\.cb at 0x[0-9a-f]+>\n"
    r"Traceback \(most recent call last\):\n  File \"<frozen importlib\._bootstrap>\", line \d+, in cb\n"
    r"KeyboardInterrupt: ?\n")


@pytest.mark.parametrize("noticed", [False, True])
def test_a_ctrl_c_that_cpython_drops_is_noticed(noticed):
    """CPython drops a KeyboardInterrupt raised in a finalizer ("Exception ignored in"); the CLI
    notices it, and the next deferral reports it as asked."""
    code = ("from mlp_magic.ssh.interrupts import InterruptsDeferred, notice_dropped_interrupts\n"
            f"if {noticed}:\n    notice_dropped_interrupts()\n"
            "class Finalized:\n    def __del__(self):\n        raise KeyboardInterrupt\n"
            "with InterruptsDeferred() as deferred:\n"
            "    Finalized()\n"   # dropped at once, its KeyboardInterrupt with it
            "print('asked' if deferred.asked else 'not asked')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    if noticed:
        assert done.stdout == "asked\n" and "Exception ignored" not in done.stderr
    else:   # what CPython does on its own
        assert done.stdout == "not asked\n" and "Exception ignored" in done.stderr


def test_the_console_script_is_the_one_with_the_start_up_care():
    from importlib.metadata import entry_points

    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts["allrun"] == "mlp_magic.allrun.command:run"


def test_ctrl_c_during_start_up_stops_a_copy_too(tmp_path, monkeypatch, capsys):
    """A Ctrl-C recorded while the command starts must stop what comes next, a --copy included."""
    from mlp_magic.allrun import command as cli_allrun, plan as allrun_module

    src, dest = tmp_path / "payload", tmp_path / "copied"
    src.write_text("x")

    def ctrl_c_now(plan):
        os.kill(os.getpid(), signal.SIGINT)   # recorded by the CLI, not raised
        return None   # --copy: nothing starts early
    monkeypatch.setattr(allrun_module.Plan, "start_early", ctrl_c_now)
    for key in [k for k in os.environ if k not in local_env()]:
        monkeypatch.delenv(key)
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        code = cli_allrun.main(["--copy", str(src), str(dest), "--", "touch", str(tmp_path / "ran")])
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    assert code == 130 and "localhost (1) [interrupted]" in capsys.readouterr().out
    assert not dest.exists() and not (tmp_path / "ran").exists()


def test_an_unusable_outdir_is_bad_input_and_nothing_runs(tmp_path):
    (tmp_path / "afile").write_text("")
    done = allrun("--outdir", str(tmp_path / "afile" / "sub"), "--", f"touch {tmp_path / 'ran'}")
    assert done.returncode == 2 and "--outdir" in done.stderr and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "ran").exists()


def test_an_exit_status_reaped_elsewhere_is_not_called_a_success():
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # the kernel then reaps children itself
    try:
        results = asyncio.run(run_on_hosts(["localhost"], "echo hi; exit 3"))
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert results[0].status == "failed" and results[0].exit_code == 255
    assert "exit status lost" in results[0].stderr


def test_without_pidfd_the_end_of_a_command_is_still_seen(monkeypatch):
    monkeypatch.delattr(os, "pidfd_open", raising=False)   # an older kernel
    started = time.monotonic()
    results = asyncio.run(run_on_hosts(["localhost"], "echo one; exit 4"))
    assert (results[0].stdout, results[0].exit_code) == ("one\n", 4)
    assert time.monotonic() - started < hang_bound(0.5)   # the end seen at once, not never


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    marker = tmp_path / "ran"
    for args in (["-H", "a;b", "--", f"touch {marker}"], ["-f", "0", "--", f"touch {marker}"],
                 ["--copy", str(tmp_path / "missing"), "--", f"touch {marker}"], ["--bogus"]):
        done = allrun(*args)
        assert done.returncode == 2, args
        assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("allrun: ")
    assert not marker.exists()


def test_zero_config_from_mlp_variables_reports_bad_hostfile(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("worker0 slots=8\nworker1 slots=eight\n")
    done = allrun("--", "true", env=local_env(MLP_MPI_HOSTFILE=str(hostfile)))
    assert done.returncode == 2
    assert "line 2" in done.stderr and "eight" in done.stderr


def test_help_exits_0():
    done = allrun("--help")
    assert done.returncode == 0 and "usage: allrun" in done.stdout


def run_on_a_terminal(args, env) -> str:
    """Run allrun with its stdout on a pseudo-terminal; return what the terminal received."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "mlp_magic.allrun.command", *args], env=env,
                            stdout=follower, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed: the command is done
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(leader)
    return b"".join(chunks).decode()


def test_live_lines_on_a_terminal_are_host_prefixed_in_colour():
    text = run_on_a_terminal(["--", "echo live-line"], local_env())
    assert "\x1b[36mlocalhost:\x1b[0m live-line" in text   # the live line, then the summary
    assert text.index("live-line") < text.index("localhost (1)")


def test_no_color_is_honoured():
    text = run_on_a_terminal(["--", "echo live-line"], local_env(NO_COLOR="1"))
    assert "localhost: live-line" in text
    assert "\x1b[" not in text


def test_run_on_hosts_streams_lines_before_the_command_ends(tmp_path):
    """The command goes on only once its first line has reached ``on_output`` (a file that
    on_output makes): it says "two" if so, "late" if the line came only after it ended."""
    seen, heard = [], tmp_path / "heard"

    def on_output(host, stream, line):
        seen.append(line)
        if line == "one":
            heard.touch()

    command = (f"echo one; for i in $(seq 300); do [ -e {heard} ] && break; sleep 0.05; done; "
               f"if [ -e {heard} ]; then echo two; else echo late; fi")
    results = asyncio.run(run_on_hosts(["localhost"], command, on_output=on_output))
    assert results[0].stdout == "one\ntwo\n"
    assert seen == ["one", "two"]


def test_memory_cap_keeps_the_head_and_outdir_keeps_everything(tmp_path):
    runner = HostRunner(["localhost"], "seq 1 100000", RunOptions(max_bytes=1000, outdir=str(tmp_path)))
    [result] = asyncio.run(runner.run())
    assert result.stdout.startswith("1\n2\n3\n") and "more bytes not kept" in result.stdout
    assert len(result.stdout) < 1200
    assert (tmp_path / "localhost.stdout").read_text() == "".join(f"{i}\n" for i in range(1, 100001))


def test_cancelling_the_coroutine_kills_the_command():
    async def cancel_soon():
        task = asyncio.ensure_future(run_on_hosts(["localhost"], "sleep 105"))
        deadline = time.monotonic() + 10
        while not processes_running("sleep 105") and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_soon())
    assert wait_gone("sleep 105") == []


def test_missing_ssh_client_is_bad_input():
    with pytest.raises(MlpMagicError, match="cannot find"):
        HostRunner(["worker0", "worker1"], "true", RunOptions(ssh="/nonexistent/ssh"))


def test_magic_entry_point_returns_and_stores_results(capsys):
    from mlp_magic.core.results import AllrunResult
    from mlp_magic.errors import HostFailure
    from mlp_magic.allrun.magic import allrun_in_notebook, run_allrun
    from mlp_magic.commands.pure.parse import allrun_in_line

    env = local_env()
    outcome = run_allrun(allrun_in_line("--timeout 20 echo from-line", None, env, {}), env)
    assert isinstance(outcome, AllrunResult) and outcome.ok and outcome.exit_status == 0
    assert outcome["localhost"].stdout == "from-line\n"
    assert "localhost (1)" in outcome.text and "from-line" in outcome.html

    namespace: dict = {}
    with pytest.raises(HostFailure, match="failed on localhost"):
        options = allrun_in_line("-o res", "echo from-cell\nexit 5\n", env, namespace)
        allrun_in_notebook(options, namespace, env=env)
    assert namespace["res"]["localhost"].exit_code == 5
    shown = capsys.readouterr().out
    assert "[localhost] from-cell" in shown            # the live line
    assert "localhost (1) [exit 5]" in shown            # then the grouped summary


def test_copy_on_the_local_machine_into_a_directory_keeps_mode(tmp_path):
    source = tmp_path / "tool.sh"
    source.write_text("#!/bin/sh\necho tool ran\n")
    source.chmod(0o741)
    target_dir = tmp_path / "dest"
    target_dir.mkdir()
    done = allrun("--json", "--copy", str(source), str(target_dir), "--", f"{target_dir}/tool.sh")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["stdout"] == "tool ran\n"
    assert (target_dir / "tool.sh").read_text() == source.read_text()
    assert (target_dir / "tool.sh").stat().st_mode & 0o777 == 0o741
    assert [p.name for p in target_dir.iterdir()] == ["tool.sh"]   # no temporary file left


def test_a_200_mb_flood_keeps_memory_bounded(tmp_path):
    """The result keeps the first 8 MiB (and says how much more there was), --outdir keeps all,
    and the allrun process stays small."""
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)\n"
        "sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + '\\n')\n"
        "sys.stdout.buffer.write(done.stdout)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure, sys.executable, "-m", "mlp_magic.allrun.command", "--json",
         "--outdir", str(tmp_path), "--", "yes 0123456789 | head -c 200000000; echo end >&2"],
        env=local_env(), capture_output=True, text=True, timeout=120)
    peak_kib, payload = done.stdout.split("\n", 1)
    [entry] = json.loads(payload)
    assert entry["status"] == "ok" and entry["stderr"] == "end\n"
    assert entry["stdout"].startswith("0123456789\n") and "191611392 more bytes not kept" in entry["stdout"]
    kept_all = tmp_path / "localhost.stdout"
    assert kept_all.stat().st_size == 200_000_000
    kept_all.unlink()   # do not leave 200 MB behind
    assert int(peak_kib) < 100 * 1024
