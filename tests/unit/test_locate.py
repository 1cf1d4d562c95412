"""panel/locate: where the dashboard is, from real runtime files and real processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mlp_magic.panel import locate


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def no_server(monkeypatch):
    monkeypatch.setattr(locate, "_panel_enabled", lambda: False)


def dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    return int(child.stdout)   # finished and reaped: no such process now


def write(folder, pid, record, mode=0o600, name=None):
    path = folder / (name or "mlp-magic-dashboard-%d.json" % pid)
    path.write_text(record if isinstance(record, str) else json.dumps(record))
    os.chmod(path, mode)
    return path


def record(pid, port=8123):
    return {"url": "http://127.0.0.1:%d/?token=abc" % port, "pid": pid, "port": port, "host": "127.0.0.1"}


def test_a_live_standalone_dashboard_is_found(runtime, no_server):
    write(runtime, os.getpid(), record(os.getpid()))
    assert locate.dashboard_url() == "http://127.0.0.1:8123/?token=abc"
    assert locate.dashboard_line() == "dashboard: http://127.0.0.1:8123/?token=abc"


def test_dead_garbled_public_or_mismatched_files_are_passed_over(runtime, no_server):
    gone = dead_pid()
    write(runtime, gone, record(gone, 1))                                  # its process ended
    write(runtime, os.getpid(), "{not json", name="mlp-magic-dashboard-1.json")
    write(runtime, os.getpid(), record(os.getpid(), 2), mode=0o644)         # not private
    write(runtime, os.getpid(), dict(record(os.getpid()), pid="me"))        # pid not a number
    write(runtime, os.getpid(), record(os.getppid()))                       # the name says another pid
    write(runtime, 1, record(1, 3))                                         # not this user's process
    os.chmod(write(runtime, os.getpid(), record(os.getpid()), name="mlp-magic-dashboard-0.json"), 0)
    (runtime / "mlp-magic-dashboard-7.json").mkdir()                        # a folder
    if os.getuid() == 0:
        pytest.skip("root reads every file and owns pid 1's peers: the ownership checks need a user")
    assert locate.dashboard_url() is None
    assert locate.dashboard_line() == locate.START_HINT and "`mlp-magic dashboard`" in locate.START_HINT


def test_none_found_for_root_too(runtime, no_server):
    gone = dead_pid()
    write(runtime, gone, record(gone, 1))
    write(runtime, os.getpid(), "{not json")
    write(runtime, os.getpid(), record(os.getpid(), 2), mode=0o644, name="mlp-magic-dashboard-1.json")
    (runtime / "mlp-magic-dashboard-7.json").mkdir()
    assert locate.dashboard_url() is None


def test_a_missing_runtime_folder_is_no_dashboard(tmp_path, monkeypatch, no_server):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "none"))
    assert locate.dashboard_url() is None


def server_file(folder, pid, token):
    info = {"url": "http://localhost:8888/lab-base/", "pid": pid, "port": 8888, "token": token,
            "secure": False, "base_url": "/lab-base/", "hostname": "localhost", "root_dir": "/"}
    path = folder / ("jpserver-%d.json" % pid)
    path.write_text(json.dumps(info))
    os.chmod(path, 0o600)


def test_a_jupyter_server_with_the_panel_comes_first(runtime, monkeypatch):
    write(runtime, os.getpid(), record(os.getpid()))
    server_file(runtime, os.getpid(), "s3cret/+")
    monkeypatch.setattr(locate, "_panel_enabled", lambda: True)
    assert locate.dashboard_url() == "http://localhost:8888/lab-base/mlp-magic/dashboard?token=s3cret%2F%2B"
    server_file(runtime, os.getpid(), "")
    assert locate.dashboard_url() == "http://localhost:8888/lab-base/mlp-magic/dashboard"
    monkeypatch.setattr(locate, "_panel_enabled", lambda: False)   # a server without the panel
    assert locate.dashboard_url() == "http://127.0.0.1:8123/?token=abc"


def test_a_dead_server_is_not_named(runtime, monkeypatch):
    server_file(runtime, dead_pid(), "t")
    monkeypatch.setattr(locate, "_panel_enabled", lambda: True)
    assert locate.dashboard_url() is None


def test_the_panel_is_enabled_in_this_environment():
    assert locate._panel_enabled() is True   # .venv/etc/jupyter/jupyter_server_config.d/mlp_magic.json


def test_never_raises(runtime, monkeypatch):
    def broken():
        raise RuntimeError("config unreadable")

    monkeypatch.setattr(locate, "_panel_enabled", broken)
    write(runtime, os.getpid(), record(os.getpid()))
    assert locate.dashboard_url() == "http://127.0.0.1:8123/?token=abc"
