"""Issue 32: an engine that cannot do CurveZMQ, on one host of an encrypted World, fails in one
line naming its host, at once, and leaves nothing running.

No libzmq without CurveZMQ can be installed here (pyzmq's wheels bundle one with it), so on
worker1 alone a sitecustomize makes ``zmq.has("curve")`` say no, as such a libzmq would; the rest
is real: the ssh launch, the engine's own check before it connects, and the World's report."""
import time

import psutil
import pytest

from tests import worlds
from tests.procs import new_children

pytestmark = pytest.mark.timeout(300)

NO_CURVE_ON_WORKER1 = '''
import socket
if socket.gethostname() == "worker1":
    import zmq
    _has = zmq.has
    zmq.has = lambda capability: capability != "curve" and _has(capability)
'''


def test_an_engine_without_curve_on_one_host_fails_in_one_line_naming_it(two_hosts, tmp_path, monkeypatch):
    ip, hostfile, bed = two_hosts
    site = tmp_path / "no-curve-on-worker1"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_CURVE_ON_WORKER1)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("MLP_MAGIC_ENCRYPT", "1")
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    started = time.monotonic()
    result = ip.run_cell(f"%%mpirun --hostfile {hostfile} -np 4\nprint('never')")
    elapsed = time.monotonic() - started
    error = str(result.error_in_exec)
    assert elapsed < 60, elapsed   # at once, not after the registration deadline
    assert error.startswith("the engines cannot start, mlp_magic needs another Python there: worker1: "
                            "this host's libzmq "), error
    assert "cannot do CurveZMQ" in error and "MLP_MAGIC_ENCRYPT=0" in error and "worker0" not in error
    assert "\n" not in error
    assert worlds.current_world() is None

    def ours():   # not the test bed's sshd
        return new_children(before, ignore=bed.workdir)

    deadline = time.monotonic() + 30
    while ours() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ours() == []
