"""client/remote_errors: a rank's error as the user reads it. A failed call of the World's start
is one line, each cause once with its ranks and hosts (the real thing:
tests/integration/test_start_failures.py); a cell's traceback reads the same on every rank."""
from ipyparallel.error import EngineError, RemoteError

from mlp_magic.engine.capture import CELL_TAG
from mlp_magic.client.remote_errors import one_line, traceback_text
from mlp_magic.world.start.calls import failure_line


def test_a_remote_error_is_its_type_and_message():
    error = RemoteError("ModuleNotFoundError", "No module named 'mpi4py'", "Traceback ...\n")
    assert one_line(error) == "ModuleNotFoundError: No module named 'mpi4py'"
    assert one_line(RemoteError("SystemExit", "", "Traceback\n  File x\nSystemExit\n")) == "SystemExit"
    assert one_line(EngineError("Engine 3 died while running task 'abc'")) == \
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


class TracebackError(Exception):
    def __init__(self, lines):
        super().__init__("remote")
        self.traceback = lines


def test_identical_failures_on_two_ranks_read_the_same():
    """Colours, execution counts and our trailing tag line differ between ranks for no reason."""
    def on_rank(count: int) -> TracebackError:
        return TracebackError(["\x1b[31mZeroDivisionError\x1b[0m  Traceback (most recent call last)",
                               f"Cell In[{count}], line 2", "      1 x = 1",
                               f"      3 {CELL_TAG}/logs/c{count}", "ZeroDivisionError: division by zero"])
    first, second = traceback_text(on_rank(3)), traceback_text(on_rank(17))
    assert first == second
    assert "\x1b" not in first and CELL_TAG not in first and "Cell, line 2" in first
    assert first.endswith("division by zero\n")
    assert traceback_text(ValueError("no traceback attribute")) == "no traceback attribute\n"
