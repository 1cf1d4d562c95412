"""The ``sh`` wrapper allrun's commands run under on each host (``ssh_launch.WRAPPER``), run here by
a local ``sh`` exactly as a remote login shell would run ssh's command string."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from mlp_magic.core.host_command import script_arguments
from mlp_magic.ssh.argv import GO_WRAPPER, WRAPPER, remote_command


def run_wrapper(wrapper: str, command: str, *, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                ignore_sigpipe: bool = False, input_bytes: bytes | None = None):
    remote = remote_command(wrapper, "mlp_allrun", "tok3", *script_arguments(os.getcwd(), command, {}))

    def child_setup():
        if ignore_sigpipe:
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    proc = subprocess.Popen(["sh", "-c", remote], stdin=stdin, stdout=subprocess.PIPE, stderr=stderr,
                            start_new_session=True, preexec_fn=child_setup)
    out, err = proc.communicate(input_bytes, timeout=20)
    return proc, out, err


def test_the_marker_comes_first_and_names_the_commands_process_group(tmp_path):
    proc, out, err = run_wrapper(WRAPPER, "echo out; echo err >&2; ps -o pgid= -p $$")
    lines = err.decode().splitlines()
    assert lines == [f"__mlp_allrun_started_tok3_{proc.pid}__", "err", "__mlp_allrun_ended_tok3_0__"]
    assert out.decode().split() == ["out", str(proc.pid), "__mlp_allrun_ended_tok3_0__"]   # in that group


@pytest.mark.parametrize("command, status", [("exit 7", 7), ("true", 0), ("kill -9 $$", 137)])
def test_the_end_marker_says_the_commands_exit_status_and_the_wrapper_exits_with_it(command, status):
    proc, out, err = run_wrapper(WRAPPER, command)
    assert err.decode().splitlines()[-1] == f"__mlp_allrun_ended_tok3_{status}__"
    assert out.decode().splitlines()[-1] == f"__mlp_allrun_ended_tok3_{status}__"   # both streams
    assert proc.returncode == status


def test_the_end_marker_comes_when_the_command_ends_not_when_its_background_process_does():
    """ssh returns once the channel closes, which the ``sleep`` holds: the marker is what says
    the command itself ended."""
    remote = remote_command(WRAPPER, "mlp_allrun", "tok3",
                            *script_arguments(os.getcwd(), "sleep 30 & echo $! >&2", {}))
    proc = subprocess.Popen(["sh", "-c", remote], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        started = time.monotonic()
        lines = [proc.stderr.readline() for _ in range(3)]
        assert lines[2] == b"__mlp_allrun_ended_tok3_0__\n" and time.monotonic() - started < 10
        assert proc.wait(timeout=10) == 0   # the wrapper is done; the sleep holds stderr
    finally:
        os.killpg(proc.pid, signal.SIGKILL)   # the sleep is in the wrapper's group
        proc.stderr.close()


@pytest.mark.parametrize("ignore_sigpipe", [False, True])
def test_a_marker_that_cannot_be_written_runs_nothing(tmp_path, ignore_sigpipe):
    """The channel closed before the wrapper started (allrun gave up on the host): its stderr is
    a pipe nobody reads. The command must not start, SIGPIPE ignored or not."""
    ran = tmp_path / "ran"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc, _, _ = run_wrapper(WRAPPER, f"touch {ran}", stderr=write_end, ignore_sigpipe=ignore_sigpipe)
    finally:
        os.close(write_end)
    assert not ran.exists()
    assert proc.returncode in (141, -signal.SIGPIPE)


@pytest.mark.parametrize("given, runs", [(b"go\n", True), (b"", False), (b"stop\n", False)])
def test_the_go_wrapper_runs_on_go_only(tmp_path, given, runs):
    ran = tmp_path / "ran"
    proc, _, err = run_wrapper(GO_WRAPPER, f"touch {ran}", stdin=subprocess.PIPE, input_bytes=given)
    assert err.decode().startswith("__mlp_allrun_started_tok3_")
    assert err.decode().endswith("__mlp_allrun_ended_tok3_0__\n") == runs
    assert ran.exists() == runs
    assert proc.returncode == 0


def test_a_copy_cut_short_leaves_nothing_and_says_so(tmp_path):
    """--copy's remote side: ssh stopped midway ends its input early; a short file must not
    replace the destination."""
    from mlp_magic.ssh.argv import copy_command

    src = tmp_path / "src.whl"
    src.write_bytes(b"x" * 5000)
    dest = tmp_path / "out" / "dest.whl"
    short = subprocess.run(["sh", "-c", copy_command(str(src), str(dest))], input=b"x" * 1200,
                           capture_output=True, timeout=20)
    assert short.returncode == 1
    assert short.stderr.decode() == "allrun: copy failed: 1200 bytes arrived, 5000 expected\n"
    assert os.listdir(dest.parent) == []
    whole = subprocess.run(["sh", "-c", copy_command(str(src), str(dest))], input=src.read_bytes(),
                           capture_output=True, timeout=20)
    assert whole.returncode == 0 and dest.read_bytes() == src.read_bytes()
    assert os.listdir(dest.parent) == ["dest.whl"]


def test_a_folder_missing_on_the_host_starts_the_command_in_home(tmp_path, monkeypatch):
    """allrun's folder rule (core/host_command): the caller's folder where it exists, else $HOME."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    remote = remote_command(WRAPPER, "mlp_allrun", "tok3",
                            *script_arguments(str(tmp_path / "gone"), "pwd; echo $X", {"X": "a  'b'"}))
    done = subprocess.run(["sh", "-c", remote], capture_output=True, text=True, timeout=20)
    assert done.stdout == f"{home}\na 'b'\n__mlp_allrun_ended_tok3_0__\n"
