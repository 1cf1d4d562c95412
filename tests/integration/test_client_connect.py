"""client/connect against a real ipcontroller: a controller that wrote its connection file but
does not answer yet (a loaded machine; here it is stopped with SIGSTOP) is waited for, and one
that never answers, or ends, is one clear error instead of ipyparallel's bare TimeoutError."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest

from mlp_magic.client.connect import connect
from mlp_magic.errors import MlpMagicError
from mlp_magic.world import processes


@pytest.fixture
def controller(tmp_path):
    process, _, client_file = processes.start_controller(str(tmp_path), "127.0.0.1", "connect-test", 30)
    try:
        info = processes.wait_for_file(client_file, process, 60)
        yield process, info
    finally:
        with contextlib.suppress(ProcessLookupError):   # the test that ends it
            os.kill(process.pid, signal.SIGCONT)
        process.stop()


def test_a_controller_that_answers_late_is_waited_for(controller):
    process, info = controller
    os.kill(process.pid, signal.SIGSTOP)
    resume = threading.Timer(6.5, os.kill, (process.pid, signal.SIGCONT))   # past one attempt
    resume.start()
    started = time.monotonic()
    try:
        client = connect(info, process, 60)
    finally:
        resume.cancel()
    try:
        assert time.monotonic() - started >= 6.0
        assert client.ids == []   # connected: a real answer, no engines yet
    finally:
        client.close()


def test_a_controller_that_never_answers_is_one_line_naming_its_log(controller):
    process, info = controller
    os.kill(process.pid, signal.SIGSTOP)
    with pytest.raises(MlpMagicError,
                       match=r"ipcontroller did not answer the kernel within 2 s; log: .*controller.log"):
        connect(info, process, 2)


def test_a_controller_that_ended_says_so(controller):
    process, info = controller
    os.kill(process.pid, signal.SIGSTOP)
    ender = threading.Timer(1.0, os.kill, (process.pid, signal.SIGKILL))
    ender.start()
    try:
        with pytest.raises(MlpMagicError, match=r"ipcontroller exited with status -9"):
            connect(info, process, 30)
    finally:
        ender.cancel()
