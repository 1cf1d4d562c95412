"""agent/rank/start: a failed agent's stderr in one line, and its answer line read or refused
(hypothesis)."""
import io
import os
from unittest import mock

from hypothesis import example, given
from hypothesis import strategies as st

from mlp_magic.agent.rank.start import error_line
from mlp_magic.core.proc_stat import process_id

from tests.unit.fuzz_checks import FUZZ, only_our_error
from tests.unit.hostile_json import dumps, hostile

TRACEBACK = """Traceback (most recent call last):
  File "<frozen runpy>", line 189, in _run_module_as_main
ModuleNotFoundError: No module named 'mlp_magic'
"""
FATAL = """Python path configuration:
  PYTHONHOME = '/nonexistent'
Fatal Python error: init_fs_encoding: failed to get the Python codec of the filesystem encoding
Python runtime state: core initialized
ModuleNotFoundError: No module named 'encodings'

Current thread 0x00007f2aaf7ecb80 (most recent call first):
  <no Python frame>
"""


def test_the_exception_is_the_line_given():
    assert error_line(TRACEBACK) == "ModuleNotFoundError: No module named 'mlp_magic'"
    assert error_line(FATAL) == "ModuleNotFoundError: No module named 'encodings'"
    assert error_line("") == "" and error_line("killed\n\n") == "killed"


@given(st.text(max_size=2000))
def test_any_stderr_gives_one_of_its_lines_shortened(text):
    line = error_line(text)
    assert "\n" not in line and "\r" not in line and len(line) <= 300
    lines = [part.strip() for part in text.splitlines() if part.strip()]
    assert (line == "") == (not lines)
    assert not lines or any(part.startswith(line) for part in lines)
    if any("error" in part.lower() for part in lines):
        assert "error" in line.lower() or len(line) == 300


def test_the_agent_leaves_the_ranks_identity_behind(monkeypatch):
    # the agent is no rank: with RANK and MASTER_ADDR, mlp-magic stacks took it for rank 0 of a
    # torch job of 2 whose rank 1 it could not find (seen on the H100 run)
    from mlp_magic.agent.rank import start as agent_start

    for name, value in {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
                        "OMPI_COMM_WORLD_RANK": "0", "PMIX_RANK": "0", "NCCL_DEBUG": "INFO"}.items():
        monkeypatch.setenv(name, value)
    env = agent_start._environment()
    gone = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"}
    assert not gone & set(env) and env["NCCL_DEBUG"] == "INFO"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == agent_start.PACKAGE_PARENT


# ------------------------------------------------------------------ the agent's answer line

class _Started:
    """A started agent, as _spawn sees one: its answer line waits in a pipe."""

    def __init__(self, line: bytes):
        read, write = os.pipe()
        os.write(write, line)
        os.close(write)
        self.stdin, self.stdout, self.killed = io.BytesIO(), os.fdopen(read, "rb", buffering=0), False

    def poll(self):
        return None if not self.killed else -9

    def kill(self):
        self.killed = True

    def wait(self):
        self.stdout.close()


@FUZZ
@given(hostile({"port": 41234, "pid": 4242}))
@example({"port": 41234, "pid": float("inf")})   # OverflowError
@example({"port": 41234, "": 4242})              # KeyError (found by hypothesis, as the next three)
@example({"port": [], "pid": 4242})              # TypeError
@example({"port": 1e308, "pid": 4242})           # accepted as port 10**308
@example({"port": float("nan"), "pid": 4242})    # ValueError
@example({"port": 41234, "pid": 0})              # accepted: a pid the World would signal later
def test_the_agents_answer_is_its_port_and_pid_or_one_error(answer):
    from mlp_magic.agent.rank import start as agent_start

    agent = _Started(dumps(answer).encode() + b"\n")
    with mock.patch("subprocess.Popen", lambda *args, **kwargs: agent):
        spawned, message = only_our_error(agent_start._spawn, b"{}\n", 5.0)
    if spawned is None:
        assert message.startswith("the GPU agent did not start") and agent.killed
        return
    _, said = spawned
    assert type(said["port"]) is int and 0 < said["port"] < 65536 and process_id(said["pid"]) == said["pid"]
