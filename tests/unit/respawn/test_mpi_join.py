"""respawn/rank/mpi_join, the parts that need no MPI: the environment a spawned engine is given
(Open MPI's ``PMIX_ENVAR``: one ``NAME=value`` per line), the connection file left for it, and
this engine's own command line."""
from __future__ import annotations

import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlp_magic.core.rank_variables import RESPAWNED_RANK, RESPAWNED_SIZE
from mlp_magic.respawn.rank.mpi_join import (CONNECTION, connection_path, forget_connection,
                                             hand_over_connection, own_command, spawned_environment)


# ---------------------------------------------------------------- spawned_environment

def test_spawned_environment_says_the_rank_and_size_then_the_worlds_mpi_settings():
    assert spawned_environment(2, 4, {}) == f"{RESPAWNED_RANK}=2\n{RESPAWNED_SIZE}=4"
    settings = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,sm,tcp"}
    assert spawned_environment(0, 16, settings).splitlines() == [
        f"{RESPAWNED_RANK}=0", f"{RESPAWNED_SIZE}=16", "OMPI_MCA_btl=self,sm,tcp", "OMPI_MCA_pml=ob1"]


# ---------------------------------------------------------------- the connection file

def test_the_connection_is_handed_over_in_a_private_file_and_forgotten(tmp_path, monkeypatch):
    monkeypatch.setenv("MLP_MAGIC_HOME", str(tmp_path / "home"))
    assert hand_over_connection("t1", {}) is None   # one host: the engines' own --file serves
    path = hand_over_connection("t1", {CONNECTION: '{"key": "k"}'})
    assert path == connection_path("t1") and open(path).read() == '{"key": "k"}'
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert hand_over_connection("t1", {CONNECTION: '{"key": "k"}'}) == path   # a second live rank of the host
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]   # no half-written copy left
    forget_connection("t1")
    forget_connection("t1")   # the host's other live rank: already gone, no error
    assert not os.path.exists(path)


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
