"""panel/locate: where the dashboard is, from real runtime files and real processes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

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


def passed_over(runtime, gone: int) -> None:
    """Files the dashboard's finder must pass over, each alone in a folder of its own so that
    one reason is tested at a time, beside one that is found (``gone``: a pid whose process
    ended). Only as a user: root reads every file, and pid 1 is root's."""
    me = os.getpid()
    cases = [("its process ended", gone, record(gone, 1), 0o600),
             ("not JSON", me, "{not json", 0o600),
             ("not private", me, record(me, 2), 0o644),
             ("pid not a number", me, dict(record(me), pid="me"), 0o600),
             ("the name says another pid", os.getppid(), record(me), 0o600),
             ("not this user's process", 1, record(1, 3), 0o600),
             ("unreadable", me, record(me), 0)]
    control = runtime / "control"
    control.mkdir()
    write(control, me, record(me, 9))
    assert [r["port"] for r in locate.standalone_records(str(control))] == [9]   # the same, but fine
    for index, (why, pid, content, mode) in enumerate(cases):
        folder = runtime / f"case-{index}"
        folder.mkdir()
        write(folder, pid, content, mode)
        assert list(locate.standalone_records(str(folder))) == [], why
    (runtime / "mlp-magic-dashboard-7.json").mkdir()                        # a folder
    assert locate.dashboard_url() is None
    assert locate.dashboard_line() == locate.START_HINT and "`mlp-magic dashboard`" in locate.START_HINT


# As root (CI), the same checks in a child that becomes an unprivileged user once Python and
# everything it needs are loaded (this interpreter may live where that user cannot read).
AS_USER = """
import os, sys, pathlib
sys.path.insert(0, {root!r})
import encodings.ascii, encodings.utf_8  # noqa: F401 (found lazily, where the user cannot read)
import jupyter_core.paths, jupyter_server.serverapp, jupyter_server.extension.config  # noqa: F401
from mlp_magic.panel import locate
from tests.unit import test_locate
locate._panel_enabled = lambda: False
gone = test_locate.dead_pid()   # a child: not once the user has no right to this interpreter
os.setgroups([]); os.setgid({uid}); os.setuid({uid})
test_locate.passed_over(pathlib.Path({runtime!r}), gone)
test_locate.write(pathlib.Path({runtime!r}), os.getpid(), test_locate.record(os.getpid(), 9))
print("passed over, as uid", os.getuid(), "; then found", locate.dashboard_url())   # the harness works
"""
NOBODY = 65534


def test_dead_garbled_public_or_mismatched_files_are_passed_over(runtime, no_server):
    if os.getuid() != 0:
        passed_over(runtime, dead_pid())
        return
    folder = tempfile.mkdtemp(prefix="mlp-locate-")   # not under pytest's root-only folder
    try:
        os.chown(folder, NOBODY, NOBODY)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = AS_USER.format(root=root, uid=NOBODY, runtime=folder)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, JUPYTER_RUNTIME_DIR=folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"passed over, as uid {NOBODY} ; then found http://127.0.0.1:9/?token=abc"


def test_none_found_for_root_too(runtime, no_server):
    """What root itself passes over, each case alone in a folder beside a control that is found."""
    gone, me = dead_pid(), os.getpid()
    cases = [("its process ended", gone, record(gone, 1), None),
             ("not JSON", me, "{not json", None),
             ("the name says another pid", me, record(me, 2), "mlp-magic-dashboard-1.json")]
    write(runtime, me, record(me, 9))
    assert [r["port"] for r in locate.standalone_records(str(runtime))] == [9]   # the control
    for index, (why, pid, content, name) in enumerate(cases):
        folder = runtime / f"case-{index}"
        folder.mkdir()
        write(folder, pid, content, name=name)
        assert list(locate.standalone_records(str(folder))) == [], why
    folder = runtime / "case-folder"
    (folder / "mlp-magic-dashboard-7.json").mkdir(parents=True)
    assert list(locate.standalone_records(str(folder))) == [], "a folder"


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
