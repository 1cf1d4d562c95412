"""The kernel the tests drive (tests/kernel.py) is what a user's frontend drives: a running asyncio
loop in every cell, displays updated by id, the stop button as SIGINT, comms, errors by type."""
import time

import pytest

from mlp_magic.errors import MlpMagicError
from tests.kernel import Kernel
from tests.timing import hang_bound


@pytest.fixture(scope="module")
def kernel():
    started = Kernel(echo=False)
    yield started
    started.shutdown()


def test_a_cell_runs_inside_the_kernels_running_event_loop(kernel):
    run = kernel.run_cell("import asyncio\nprint(asyncio.get_running_loop().is_running())")
    assert run.success and run.stdout == "True\n"
    refused = kernel.run_cell("asyncio.run(asyncio.sleep(0))")
    assert "cannot be called from a running event loop" in str(refused.error_in_exec)


def test_a_display_and_its_update_arrive_as_a_frontend_sees_them(kernel):
    run = kernel.run_cell("handle = display('first', display_id=True)\nhandle.update('second')\n"
                          "print('after')")
    kinds = [m["msg_type"] for m in run.messages]
    assert kinds == ["execute_input", "display_data", "update_display_data", "stream"], kinds
    shown = [out for out in run.outputs if out["output_type"] == "display_data"]
    assert len(shown) == 1 and shown[0]["data"]["text/plain"] == "'second'"   # updated in place
    assert run.shown == "'second'\nafter\n"


def test_the_stop_button_is_a_sigint_that_ends_the_cell(kernel):
    msg_id = kernel.send("import time\ntime.sleep(60)")
    time.sleep(0.5)
    started = time.monotonic()
    kernel.interrupt()
    run = kernel.wait(msg_id, timeout=hang_bound(30))
    assert run.status == "error" and isinstance(run.error_in_exec, KeyboardInterrupt)
    assert time.monotonic() - started < 10
    assert kernel.run_cell("print('still here')").stdout == "still here\n"


def test_a_cell_given_up_on_is_interrupted_before_the_next_runs(kernel):
    """A test's timeout (pytest's, or the call's own) leaves its cell running: the next request
    (a ``finally: %mpirun --stop``) once waited behind it for its whole 600 s."""
    with pytest.raises(AssertionError, match="did not finish the cell within 1 s"):
        kernel.run_cell("import time\ntime.sleep(600)", timeout=1)
    started = time.monotonic()
    assert kernel.run_cell("print('next')").stdout == "next\n"
    assert time.monotonic() - started < 10


def test_a_comm_opened_by_a_cell_reaches_the_frontend(kernel):
    run = kernel.run_cell("from comm import create_comm\n"
                          "c = create_comm(target_name='mlp-test', data={'n': 1})")
    opened = run.of_type("comm_open")
    assert len(opened) == 1 and opened[0]["content"]["target_name"] == "mlp-test"
    assert opened[0]["content"]["data"] == {"n": 1}


def test_errors_come_back_with_their_type_and_one_line(kernel):
    run = kernel.run_cell("%load_ext mlp_magic\n")
    assert run.success
    refused = kernel.run_cell("%mpirun --no-such-option")
    assert isinstance(refused.error_in_exec, MlpMagicError), refused.error_in_exec
    assert "--no-such-option" in str(refused.error_in_exec)
    assert refused.shown.strip().startswith("mlp_magic: ")   # one line, no traceback


def test_values_the_environment_and_the_folder_follow_the_test(kernel, monkeypatch, tmp_path):
    kernel.user_ns["given"] = {"lr": 0.1, "layers": [1, 2]}
    assert kernel.eval("given['layers'][1] + 1") == 3
    monkeypatch.setenv("MLP_TEST_FOLLOWED", "yes")
    monkeypatch.chdir(tmp_path)
    assert kernel.run_cell("import os\nprint(os.environ['MLP_TEST_FOLLOWED'], os.getcwd())").stdout == \
        f"yes {tmp_path}\n"
    monkeypatch.undo()
    assert kernel.eval("'MLP_TEST_FOLLOWED' in __import__('os').environ") is False
