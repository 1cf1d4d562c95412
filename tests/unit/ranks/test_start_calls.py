"""ranks/start_calls: a failed call of the World's start reads as one line, each cause once with
its ranks and hosts (the real thing: tests/integration/test_start_failures.py)."""
from ipyparallel.error import EngineError, RemoteError

from mlp_magic.ranks.start_calls import cause, failure_line


def test_a_remote_error_is_its_type_and_message():
    error = RemoteError("ModuleNotFoundError", "No module named 'mpi4py'", "Traceback ...\n")
    assert cause(error) == "ModuleNotFoundError: No module named 'mpi4py'"
    assert cause(RemoteError("SystemExit", "", "Traceback\n  File x\nSystemExit\n")) == "SystemExit"
    assert cause(EngineError("Engine 3 died while running task 'abc'")) == \
        "EngineError: Engine 3 died while running task 'abc'"


def test_each_cause_once_with_its_ranks_and_hosts():
    hosts = {0: "w0", 1: "w0", 2: "w1", 3: "w1", 4: "w2"}
    missing = RemoteError("ModuleNotFoundError", "No module named 'mpi4py'", "")
    failed = {2: missing, 3: missing, 4: RemoteError("ImportError", "libmpi.so.40:\n  not found", ""),
              0: missing}
    line = failure_line(failed, hosts.get, "the set-up", "/logs/w")
    assert line == ("the World did not start: the set-up failed on ranks 0,2-3 (3) on w[0-1]: "
                    "ModuleNotFoundError: No module named 'mpi4py'; rank 4 on w2: ImportError: "
                    "libmpi.so.40: not found; logs in /logs/w")


def test_the_last_words_of_ranks_that_could_not_start_are_read_per_rank():
    from mlp_magic.world.start.registration import last_words

    openmpi = ("[1,0]<stderr>: 2026-11-25 09:51:13.117 [rank 0] [RankEngine] WARNING | Not using CurveZMQ\n"
               "[1,1]<stderr>: Traceback (most recent call last):\n"
               "[1,1]<stderr>:   File \"<frozen runpy>\", line 198, in _run_module_as_main\n"
               "[1,1]<stderr>: ModuleNotFoundError: No module named 'mpi4py'\n"
               "prterun detected that one or more processes exited with non-zero status,\n"
               "[1,3]<stdout>: /usr/bin/python3: No module named mlp_magic.engine.main\n")
    assert last_words(openmpi, []) == {
        1: "ModuleNotFoundError: No module named 'mpi4py'",
        3: "/usr/bin/python3: No module named mlp_magic.engine.main"}
    mpich = "[2] SyntaxError: invalid syntax\n[0] all good\n"
    assert last_words(mpich, []) == {2: "SyntaxError: invalid syntax"}
