"""GPU inventories over ssh (``collect_over_ssh``) on the namespace test bed: real sshd, real OpenSSH.

The hosts are CPU-only namespaces of this machine, so every worker answers source "none" with
no GPU; what is tested is the transport: each host runs ``mlp-magic topo --json`` itself, a host
down or silent is reported as such, and one deadline bounds the whole call. Only the test bed's
10.77.0.x addresses are contacted (the ssh aliases resolve through the bed's ssh config).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time


from mlp_magic.cluster.text import state_text
from mlp_magic.cluster.widget import cluster_view
from mlp_magic.ssh.runner import CONNECT_GRACE
from mlp_magic.gpu.collect import collect_over_ssh
from tests.timing import hang_bound

STARTUP_S = 1.0   # ssh handshakes and interpreter start, usually (bounds: tests/timing.py)


def fake_python(tmp_path, body: str) -> str:
    """A script that stands in for the remote interpreter (the bed's hosts share this filesystem)."""
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def timed(**kwargs):
    started = time.monotonic()
    found = collect_over_ssh(**kwargs)
    return found, time.monotonic() - started


def test_every_worker_answers_from_its_own_host(bed, tmp_path):
    # The interpreter is wrapped so that each host leaves its own hostname behind: the probe
    # really ran there, once per host.
    seen = tmp_path / "seen"
    python = fake_python(tmp_path, 'hostname >>%s\nexec %s "$@"\n' % (seen, sys.executable))
    found, took = timed(hosts=bed.host_names(), ssh=bed.ssh_command(), timeout=15.0, python=python)
    assert list(found) == bed.host_names()
    for name, gpus in found.items():
        assert (gpus.host, gpus.source, gpus.gpus, gpus.nics, gpus.links, gpus.error) == (
            name, "none", [], [], {}, None)
    assert sorted(seen.read_text().split()) == bed.host_names()
    print("4 hosts over ssh: %.2f s (first connections)" % took)
    found, took = timed(hosts=bed.host_names(), ssh=bed.ssh_command(), timeout=5.0)
    assert {g.error for g in found.values()} == {None}
    print("4 hosts over ssh: %.2f s (reused connections)" % took)
    assert took < hang_bound(STARTUP_S)   # the figures above are printed, not asserted


def test_host_with_sshd_down_is_unreachable_within_the_connect_timeout(bed):
    with bed.host_down(2):
        found, took = timed(hosts=bed.host_names(), ssh=bed.ssh_command(), timeout=10.0, connect_timeout=2.0)
    assert found["worker2"].source == "none" and found["worker2"].gpus == []
    assert found["worker2"].error.startswith("unreachable: ")
    assert "Connection refused" in found["worker2"].error
    assert {name: g.error for name, g in found.items() if name != "worker2"} == {
        "worker0": None, "worker1": None, "worker3": None}
    assert took < hang_bound(STARTUP_S), took   # refused at once; the 10 s deadline would say "timeout"


def test_silent_host_is_unreachable_and_the_call_stays_bounded(bed):
    # ssh's ConnectTimeout for a new connection; the transport's connect deadline (ConnectTimeout
    # and a 2 s grace) for a connection reused from an earlier test, whose packets now vanish.
    with bed.host_blackholed(3):
        found, took = timed(hosts=bed.host_names(), ssh=bed.ssh_command(), timeout=8.0, connect_timeout=1.0)
    print("worker3:", found["worker3"].error, "after %.2f s" % took)
    assert found["worker3"].error.startswith("unreachable: "), found["worker3"].error
    assert [found["worker%d" % i].error for i in range(3)] == [None, None, None]
    assert took < hang_bound(1.0 + CONNECT_GRACE + STARTUP_S), took  # the 8 s deadline would say "timeout"


def test_hung_probe_times_out_at_the_deadline_and_is_killed(bed, tmp_path):
    python = fake_python(tmp_path, "exec sleep 37\n")
    found, took = timed(hosts=bed.host_names(), ssh=bed.ssh_command(), timeout=3.0, python=python)
    assert took < hang_bound(3.0 + STARTUP_S), took   # the 3 s deadline, not the 37 s probe
    assert {g.error for g in found.values()} == {"timeout: no answer within 3 s"}
    # The remote probes are stopped in the background after the deadline.
    deadline = time.monotonic() + 15
    left = [h.name for h in bed.hosts for _, line in bed.processes_on(h.index) if line == "sleep 37"]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [h.name for h in bed.hosts for _, line in bed.processes_on(h.index) if line == "sleep 37"]
    assert left == []


def test_failed_and_garbled_answers(bed, tmp_path):
    python = fake_python(tmp_path, """case "$(hostname)" in
  worker1) echo warming up >&2; echo No module named mlp_magic >&2; exit 3;;
  worker2) echo "not json";;
  *) echo '{"x": {"source": "cuda"}}';;
esac
""")
    found = collect_over_ssh(bed.host_names(), ssh=bed.ssh_command(), timeout=10.0, python=python)
    assert found["worker1"].error == "exit 3: No module named mlp_magic"
    assert found["worker2"].error.startswith("bad JSON: Expecting value")
    assert found["worker0"].error == "bad JSON: source 'cuda' is not one of nvml, nvidia-smi, none"


def test_ssh_command_from_the_environment(bed, monkeypatch):
    monkeypatch.setenv("MLP_MAGIC_SSH", " ".join(bed.ssh_command()))
    found = collect_over_ssh(["worker0", "root@worker1"], timeout=10.0)
    assert [(name, g.error) for name, g in found.items()] == [("worker0", None), ("worker1", None)]


def test_cluster_view_probes_hosts_no_world_covers(bed, tmp_path):
    hostfile = bed.write_hostfile(str(tmp_path / "hosts"), slots=2, use_addresses=True)
    with bed.host_down(1):
        started = time.monotonic()
        view = cluster_view(hostfile=hostfile, ssh=bed.ssh_command(), timeout=3.0, state_dir=str(tmp_path))
        took = time.monotonic() - started
    addresses = [h.address for h in bed.hosts]
    assert [h.name for h in view.state.hosts] == addresses
    for host in view.state.hosts:
        assert host.gpus is not None and host.gpus.gpus == []
    down = view.state.hosts[1]
    assert down.reachable is False and down.gpus.error.startswith("unreachable: ")
    assert [h.gpus.error for i, h in enumerate(view.state.hosts) if i != 1] == [None, None, None]
    assert "%s  2      2-3    no" % addresses[1] in state_text(view.state)
    assert "not probed" not in state_text(view.state)
    assert took < hang_bound(3.0 + STARTUP_S), took
    view.close()


def test_status_command_shows_every_hosts_gpus(bed, tmp_path):
    hostfile = bed.write_hostfile(str(tmp_path / "hosts"), slots=4, use_addresses=True)
    env = dict(os.environ, MLP_MAGIC_SSH=" ".join(bed.ssh_command()), **bed.env())
    with bed.host_down(3):
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "status", "--hostfile", hostfile,
                               "--json", "--timeout", "4"],
                              env=env, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    hosts = json.loads(done.stdout)["hosts"]
    assert [h["name"] for h in hosts] == [h.address for h in bed.hosts]
    answers = [(h["reachable"], h["gpus"]["source"], h["gpus"]["gpus"], h["gpus"]["error"]) for h in hosts]
    assert answers[:3] == [(True, "none", [], None)] * 3
    assert hosts[3]["reachable"] is False and hosts[3]["gpus"]["error"].startswith("unreachable: ")
    assert took < hang_bound(4.0 + STARTUP_S), took
    text = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "status", "--hostfile", hostfile], env=env,
                          capture_output=True, text=True, timeout=60).stdout
    assert text.splitlines()[2].split() == [bed.hosts[0].address, "4", "0-3", "yes", "none"]


def test_topo_of_another_host(bed):
    env = dict(os.environ, MLP_MAGIC_SSH=" ".join(bed.ssh_command()), **bed.env())
    done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "topo", "--host", "worker2", "--json"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"worker2": {"source": "none", "gpus": [], "nics": [], "links": {},
                                                   "error": None}}
    with bed.host_down(2):
        done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "topo", "--host", "worker2"],
                              env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("mlp-magic: topo --host worker2: unreachable: ")
    assert done.stderr.count("\n") == 1
