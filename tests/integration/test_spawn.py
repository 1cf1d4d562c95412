"""``ssh_launch.spawn``: how allrun starts each host's process (posix_spawn), with real children."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mlp_magic.errors import MlpMagicError
from mlp_magic.ssh_launch import Launch, spawn


def finish(child) -> tuple[int, str, str]:
    if child.stdin is not None:
        child.stdin.close()
    out, err = child.stdout.read().decode(), child.stderr.read().decode()
    child.stdout.close()
    child.stderr.close()
    return child.wait(), out, err


def test_stdout_stderr_and_exit_status():
    code, out, err = finish(spawn(["sh", "-c", "echo out; echo err >&2; exit 7"]))
    assert (code, out, err) == (7, "out\n", "err\n")


def test_stdin_from_devnull_a_file_or_a_pipe(tmp_path):
    assert finish(spawn(["cat"]))[1] == ""
    source = tmp_path / "in.txt"
    source.write_text("from the file\n")
    assert finish(spawn(["cat"], str(source)))[1] == "from the file\n"
    child = spawn(["cat"], stdin_pipe=True)
    child.stdin.write(b"through the pipe\n")
    assert finish(child)[1] == "through the pipe\n"


def test_own_session_default_sigpipe_and_only_stdio_inherited():
    # Python ignores SIGPIPE; a child must not inherit that (``yes | head`` would never end).
    script = ("ps -o pid=,pgid=,sid= -p $$; grep ^SigIgn: /proc/$$/status; "
              "ls /proc/$$/fd")
    keep = os.open(os.devnull, os.O_RDONLY)       # close-on-exec, as Python opens them
    inheritable = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(inheritable, True)          # as a descriptor this process inherited is
    try:
        code, out, _ = finish(spawn(["sh", "-c", script]))
    finally:
        os.close(keep)
        os.close(inheritable)
    lines = out.split("\n")
    pid, pgid, sid = lines[0].split()
    assert pid == pgid == sid
    ignored = int(lines[1].split()[1], 16)
    assert not ignored & (1 << (13 - 1)), lines[1]        # SIGPIPE (13) at its default
    assert sorted(int(fd) for fd in lines[2:] if fd) == [0, 1, 2], out


def test_with_our_own_stdio_closed_the_child_still_gets_the_right_pipes():
    """Where our stdin, stdout and stderr are closed, new pipes take descriptors 0-2; placing the
    child's ends must not overwrite one another."""
    program = (
        "import os\n"
        "from mlp_magic.ssh_launch import spawn\n"
        "report = os.dup(1)\n"
        "for fd in (0, 1, 2): os.close(fd)\n"
        "child = spawn(['sh', '-c', 'cat; echo out; echo err >&2'], stdin_pipe=True)\n"
        "child.stdin.write(b'in\\n'); child.stdin.close()\n"
        "out, err = child.stdout.read(), child.stderr.read()\n"
        "os.write(report, repr((child.wait(), out, err)).encode())\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert done.stdout == repr((0, b"in\nout\n", b"err\n")), done.stderr


def test_errors_name_the_program_or_the_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        spawn(["no-such-program-mlpt"])
    launch = Launch(["localhost"], "true", stdin_path=str(tmp_path / "gone"))
    with pytest.raises(MlpMagicError, match=r"cannot read '.*gone': No such file"):
        launch.start(0)
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(FileNotFoundError):
        spawn(["no-such-program-mlpt"], stdin_pipe=True)
    assert set(os.listdir("/proc/self/fd")) == before   # no descriptor left behind
