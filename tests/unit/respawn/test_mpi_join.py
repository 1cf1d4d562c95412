"""respawn/rank/mpi_join, the parts that need no MPI: the environment a spawned engine is given
(Open MPI's ``PMIX_ENVAR``: one ``NAME=value`` per line) and this engine's own command line."""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.core.rank_variables import RESPAWNED_RANK, RESPAWNED_SIZE
from mlp_magic.respawn.rank.mpi_join import CARRIED, own_command, spawned_environment


# ---------------------------------------------------------------- spawned_environment

def test_spawned_environment_says_the_rank_and_size():
    assert spawned_environment(2, 4, {}) == f"{RESPAWNED_RANK}=2\n{RESPAWNED_SIZE}=4"
    assert RESPAWNED_RANK == "MLP_MAGIC_RESPAWNED_RANK" and RESPAWNED_SIZE == "MLP_MAGIC_RESPAWNED_SIZE"


def test_spawned_environment_carries_the_controller_address():
    environ = {"IPP_CONNECTION_INFO": "/tmp/ipcontroller-engine.json", "HOME": "/root", "PATH": "/bin"}
    assert spawned_environment(0, 8, environ).split("\n") == [
        f"{RESPAWNED_RANK}=0", f"{RESPAWNED_SIZE}=8", "IPP_CONNECTION_INFO=/tmp/ipcontroller-engine.json"]


def test_spawned_environment_keeps_an_equals_sign_in_the_value():
    environ = {"IPP_CONNECTION_INFO": '{"url": "tcp://10.0.0.1:5555", "key=": "a=b"}'}
    last = spawned_environment(1, 2, environ).split("\n")[-1]
    assert last == 'IPP_CONNECTION_INFO={"url": "tcp://10.0.0.1:5555", "key=": "a=b"}'


def test_spawned_environment_leaves_out_a_value_with_a_newline():
    environ = {"IPP_CONNECTION_INFO": '{\n  "url": "tcp://10.0.0.1:5555"\n}'}
    assert spawned_environment(3, 4, environ) == f"{RESPAWNED_RANK}=3\n{RESPAWNED_SIZE}=4"


def test_spawned_environment_carries_an_empty_value():
    assert spawned_environment(0, 1, {"IPP_CONNECTION_INFO": ""}).split("\n")[-1] == "IPP_CONNECTION_INFO="


def test_spawned_environment_reads_the_process_environment_by_default(monkeypatch):
    monkeypatch.setenv("IPP_CONNECTION_INFO", "/run/engine.json")
    assert spawned_environment(5, 6).split("\n") == [
        f"{RESPAWNED_RANK}=5", f"{RESPAWNED_SIZE}=6", "IPP_CONNECTION_INFO=/run/engine.json"]
    monkeypatch.delenv("IPP_CONNECTION_INFO")
    assert spawned_environment(5, 6) == f"{RESPAWNED_RANK}=5\n{RESPAWNED_SIZE}=6"


VALUE = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(st.integers(0, 10 ** 6), st.integers(1, 10 ** 6),
       st.dictionaries(st.sampled_from([*CARRIED, "HOME", "PATH", "OMPI_COMM_WORLD_RANK"]), VALUE))
@settings(max_examples=300)
def test_spawned_environment_is_one_name_value_per_line(rank, size, environ):
    lines = spawned_environment(rank, size, environ).split("\n")
    pairs = [line.partition("=") for line in lines]
    assert all(sep == "=" for _, sep, _ in pairs)
    assert [(name, value) for name, _, value in pairs[:2]] == [(RESPAWNED_RANK, str(rank)),
                                                               (RESPAWNED_SIZE, str(size))]
    carried = {name: value for name, _, value in pairs[2:]}
    kept = {name: value for name, value in environ.items() if name in CARRIED and "\n" not in value}
    assert carried == kept


# ---------------------------------------------------------------- own_command

@pytest.fixture
def cmdline(tmp_path):
    def write(content: bytes) -> str:
        path = tmp_path / "cmdline"
        path.write_bytes(content)
        return str(path)
    return write


def test_own_command_splits_the_nul_separated_words(cmdline):
    path = cmdline(b"/usr/bin/python3\0-m\0ipyparallel.engine\0--mpi\0")
    assert own_command(path) == ["/usr/bin/python3", "-m", "ipyparallel.engine", "--mpi"]


def test_own_command_without_a_final_nul(cmdline):
    assert own_command(cmdline(b"python\0-c\0pass")) == ["python", "-c", "pass"]


def test_own_command_keeps_spaces_and_an_empty_word_within(cmdline):
    assert own_command(cmdline(b"python\0\0a b\0c\0")) == ["python", "", "a b", "c"]


def test_own_command_decodes_utf8(cmdline):
    assert own_command(cmdline("python\0caf\u00e9.py\0".encode())) == ["python", "caf\u00e9.py"]


def test_own_command_reads_this_process_by_default():
    if not os.path.exists("/proc/self/cmdline"):
        pytest.skip("no /proc here")
    words = own_command()
    assert len(words) >= 1 and "python" in os.path.basename(words[0])


# Non-empty words: a trailing empty argument is not read back (see the report; rstrip drops it).
WORD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
               min_size=1, max_size=20)


@given(st.lists(WORD, min_size=1, max_size=10), st.booleans())
@settings(max_examples=200)
def test_own_command_reads_back_what_was_written(tmp_path_factory, words, final_nul):
    path = tmp_path_factory.mktemp("cmd") / "cmdline"
    path.write_bytes(b"\0".join(word.encode() for word in words) + (b"\0" if final_nul else b""))
    assert own_command(str(path)) == words
