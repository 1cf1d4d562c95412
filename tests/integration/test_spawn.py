"""``ssh/spawn``: how allrun starts each host's process, with real children; both ways it
has (posix_spawn, and subprocess where posix_spawn cannot do it all) must behave alike."""
from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from mlp_magic.errors import MlpMagicError
from mlp_magic.ssh import spawn as spawning
from mlp_magic.ssh.spawn import Launch
from mlp_magic.ssh.spawn import spawn


@pytest.fixture(params=["posix_spawn", "subprocess"])
def way(request, monkeypatch):
    if request.param == "posix_spawn" and not spawning.posix_spawn_usable:
        pytest.skip("posix_spawn cannot start allrun's processes here (no /proc/self/fd or no setsid)")
    monkeypatch.setattr(spawning, "posix_spawn_usable", request.param == "posix_spawn")
    return request.param


def finish(child) -> tuple[int, str, str]:
    if child.stdin is not None:
        child.stdin.close()
    out, err = child.stdout.read().decode(), child.stderr.read().decode()
    child.stdout.close()
    child.stderr.close()
    return child.wait(), out, err


def test_stdout_stderr_and_exit_status(way):
    code, out, err = finish(spawn(["sh", "-c", "echo out; echo err >&2; exit 7"]))
    assert (code, out, err) == (7, "out\n", "err\n")


def test_stdin_from_devnull_a_file_or_a_pipe(way, tmp_path):
    assert finish(spawn(["cat"]))[1] == ""
    source = tmp_path / "in.txt"
    source.write_text("from the file\n")
    assert finish(spawn(["cat"], str(source)))[1] == "from the file\n"
    child = spawn(["cat"], stdin_pipe=True)
    child.stdin.write(b"through the pipe\n")
    assert finish(child)[1] == "through the pipe\n"


def test_own_session_default_sigpipe_and_only_stdio_inherited(way):
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
    assert not ignored & (1 << (25 - 1)), lines[1]        # SIGXFSZ (25) too
    assert sorted(int(fd) for fd in lines[2:] if fd) == [0, 1, 2], out


def test_with_our_own_stdio_closed_the_child_still_gets_the_right_pipes(way):
    """Where our stdin, stdout and stderr are closed, new pipes take descriptors 0-2; placing the
    child's ends must not overwrite one another."""
    program = (
        "import os\n"
        "from mlp_magic.ssh import spawn as spawning\n"
        f"spawning.posix_spawn_usable = {way == 'posix_spawn'}\n"
        "from mlp_magic.ssh.spawn import spawn\n"
        "report = os.dup(1)\n"
        "for fd in (0, 1, 2): os.close(fd)\n"
        "child = spawn(['sh', '-c', 'cat; echo out; echo err >&2'], stdin_pipe=True)\n"
        "child.stdin.write(b'in\\n'); child.stdin.close()\n"
        "out, err = child.stdout.read(), child.stderr.read()\n"
        "os.write(report, repr((child.wait(), out, err)).encode())\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert done.stdout == repr((0, b"in\nout\n", b"err\n")), done.stderr


def descriptors_left_behind(way: str, setup: str, action: str) -> str:
    """Run ``action`` in a fresh Python with no other thread, and print the descriptors it left
    open. In the test process itself the threads of earlier tests open and close descriptors
    while we compare (a floors run once saw fd 18 open and fd 144 close between two listings)."""
    program = (
        "import os\n"
        "from mlp_magic.ssh import spawn as spawning\n"
        f"spawning.posix_spawn_usable = {way == 'posix_spawn'}\n"
        "from mlp_magic.ssh.spawn import spawn\n"
        f"{setup}\n"
        "before = set(os.listdir('/proc/self/fd'))\n"
        f"{action}\n"
        "print(sorted(set(os.listdir('/proc/self/fd')) ^ before))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_errors_name_the_program_or_the_file(way, tmp_path):
    with pytest.raises(FileNotFoundError):
        spawn(["no-such-program-mlpt"])
    launch = Launch(["localhost"], "true", stdin_path=str(tmp_path / "gone"))
    with pytest.raises(MlpMagicError, match=r"cannot read '.*gone': No such file"):
        launch.start(0)
    not_a_program = tmp_path / "garbage"
    not_a_program.write_bytes(b"\x00\x01 not an executable format\n")
    not_a_program.chmod(0o755)
    for stdin in ({"stdin_pipe": True}, {}, {"stdin_path": str(not_a_program)}):
        with pytest.raises(OSError) as failed:   # the exec itself fails, after the pipes exist
            spawn([str(not_a_program)], **stdin)
        assert failed.value.errno == errno.ENOEXEC
        action = ("import errno\ntry:\n"
                  f"    spawn([{str(not_a_program)!r}], **{stdin!r})\n"
                  "except OSError as failed:\n    assert failed.errno == errno.ENOEXEC\n"
                  "else:\n    raise SystemExit('no error')")
        assert descriptors_left_behind(way, "", action) == "[]", stdin   # none left behind


def test_a_libc_without_posix_spawn_setsid_falls_back_to_subprocess(monkeypatch):
    monkeypatch.setattr(spawning, "posix_spawn_usable", True)

    def no_setsid(*args, **kwargs):
        raise NotImplementedError("setsid is not supported")   # as os.posix_spawn says it
    monkeypatch.setattr(os, "posix_spawn", no_setsid)
    code, out, _ = finish(spawn(["sh", "-c", "ps -o sid= -p $$; echo $$"]))
    sid, pid = out.split()
    assert (code, sid) == (0, pid) and spawning.posix_spawn_usable is False
    setup = ("def no_setsid(*args, **kwargs):\n"
             "    raise NotImplementedError('setsid is not supported')\n"
             "os.posix_spawn = no_setsid")
    action = ("child = spawn(['true'])\nchild.wait()\n"
              "[stream.close() for stream in (child.stdout, child.stderr)]")
    assert descriptors_left_behind("posix_spawn", setup, action) == "[]"


def test_starting_many_hosts_lists_our_descriptors_once_and_each_child_has_only_stdio(monkeypatch):
    """Listing /proc/self/fd for each start made the starts of N hosts cost N² (their pipes are
    listed again and again: 7 s for 2,000 hosts); start_all lists them once. Each child still
    gets descriptors 0-2 only, an inherited one included."""
    if not spawning.posix_spawn_usable:
        pytest.skip("posix_spawn cannot start allrun's processes here")
    listed = []
    real = spawning.inheritable_descriptors
    monkeypatch.setattr(spawning, "inheritable_descriptors", lambda: listed.append(1) or real())
    inheritable = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(inheritable, True)
    try:
        launch = Launch([f"host{i}" for i in range(20)], "true", ssh=["sh", "-c", "ls /proc/$$/fd", "ssh"],
                        local=False)
        launch.start_all()
    finally:
        os.close(inheritable)
    assert len(listed) == 1
    for index in range(20):
        code, out, _ = finish(launch.start(index))
        assert code == 0 and sorted(int(fd) for fd in out.split()) == [0, 1, 2], out
