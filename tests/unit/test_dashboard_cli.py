"""``mlp-magic dashboard``'s bad input: one line naming what is wrong, exit status 2, nothing
started and no runtime file left behind."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from mlp_magic.cli import main


PORT = "mlp-magic dashboard: --port: expected a positive integer up to 65535, got "


@pytest.mark.parametrize("argv, line", [
    (["--port", "0"], PORT + "'0'"),
    (["--port", "70000"], PORT + "'70000'"),
    (["--port", "http"], PORT + "'http'"),
    (["--host", "nowhere.invalid"], "mlp-magic: --host 'nowhere.invalid': not an address to listen on"),
    (["--host", "192.0.2.1"], "mlp-magic: port (any) on 192.0.2.1 cannot be listened on"),
    (["extra"], "mlp-magic dashboard: unexpected argument 'extra'"),
])
def test_bad_input_is_one_line_and_status_2(capsys, argv, line):
    assert main(["dashboard", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(line) and err.count("\n") == 1, err


def test_a_port_in_use_is_named_and_nothing_is_left_running(tmp_path):
    runtime = tmp_path / "runtime"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "dashboard", "--port", str(port)],
                              env=dict(os.environ, JUPYTER_RUNTIME_DIR=str(runtime)), capture_output=True,
                              text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    said = f"mlp-magic: port {port} on 127.0.0.1 is in use; give another with --port or --host\n"
    assert done.stderr == said
    assert not runtime.exists() or os.listdir(runtime) == []
