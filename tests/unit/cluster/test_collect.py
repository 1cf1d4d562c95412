"""The one collector: topology, published Worlds, GPUs over ssh or in-process, reachability."""
from __future__ import annotations

import json
import os
import tempfile
import time

import pytest
from hypothesis import example, given

from mlp_magic.cluster.collect import CollectOptions, StateCollector, load_inventories, read_health
from mlp_magic.cluster.text import state_text
from mlp_magic.cluster.widget import cluster_view
from mlp_magic.errors import MlpMagicError
from mlp_magic.world.published import publish
from tests.unit.cluster.states import DGX1, NO_GPU_HERE, h200
from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import dumps, hostile, replaced


def test_collector_with_saved_topology_and_published_world(tmp_path):
    saved = tmp_path / "worker1-topo.txt"
    saved.write_text(DGX1.read_text())
    publish({"pid": os.getpid(), "np": 2, "mpi": "openmpi",
             "ranks": [{"rank": 0, "host": "localhost", "engine_id": 0, "state": "idle"},
                       {"rank": 1, "host": "localhost", "engine_id": 1, "state": "busy"}]},
            str(tmp_path / "worlds"))
    view = cluster_view(hosts="localhost:2,worker1:8", gpus={"worker1": saved}, check_reachable=False,
                        state_dir=str(tmp_path / "worlds"), timeout=3.0)
    local, worker1 = view.state.hosts
    assert local.engine_summary == "2 engines: 1 busy, 1 idle"
    assert worker1.gpus.links["GPU6"]["mlx5_1"] == "PIX" and worker1.gpus.host == "worker1"
    if NO_GPU_HERE:
        assert local.gpus.source == "none" and local.gpus.gpus == []
    view.close()


def test_hosts_no_world_covers_go_over_ssh_and_this_machine_in_process(tmp_path):
    # `false` as the ssh client: no network here, and what it says comes back as hgx1's error
    # (the real ssh path runs in tests/multihost/test_gpu_collect_ssh.py). This machine is
    # probed in-process, never through that client.
    started = time.monotonic()
    view = cluster_view(hosts="localhost:2,hgx1:8", ssh="false", check_reachable=False,
                        state_dir=str(tmp_path), timeout=3.0)
    assert time.monotonic() - started < 3.0
    local, hgx1 = view.state.hosts
    assert (hgx1.gpus.host, hgx1.gpus.source, hgx1.gpus.gpus, hgx1.gpus.error) == (
        "hgx1", "none", [], "exit 1: no message")
    row = "hgx1       8      2-9    ?          no engines  none (exit 1: no message)"
    assert row in state_text(view.state).splitlines()
    assert local.gpus.host == "localhost" and local.gpus.error is None
    view.close()
    # $MLP_MAGIC_SSH of the collector's environment names the client when ``ssh`` does not.
    view = cluster_view(hosts="hgx1:8", env={"MLP_MAGIC_SSH": "no-such-ssh-client"},
                        check_reachable=False, state_dir=str(tmp_path), timeout=3.0)
    assert view.state.hosts[0].gpus.error == "--ssh: cannot find the command 'no-such-ssh-client'"
    view.close()


def test_embedded_default_reaches_this_machine(tmp_path):
    view = cluster_view(env={}, state_dir=str(tmp_path), timeout=3.0)
    [host] = view.state.hosts
    assert view.state.source == "local machine" and host.reachable is True
    assert host.ranks == list(range(host.slots))
    view.close()


def test_collector_errors():
    state = StateCollector(CollectOptions(hostfile="/nonexistent/hostfile", reach_timeout=None))()
    assert state.error and "/nonexistent/hostfile" in state.error and state.hosts == []
    with pytest.raises(MlpMagicError, match="'/nonexistent/topo.txt': no such file"):
        load_inventories({"w": "/nonexistent/topo.txt"})
    with pytest.raises(MlpMagicError, match="expected {host: HostGpus"):
        load_inventories({"w": 42})
    assert [g.host for g in load_inventories([h200("w3")])] == ["w3"]
    with pytest.raises(MlpMagicError, match="timeout must be positive"):
        StateCollector(CollectOptions(timeout=0))


def test_only_the_panel_shows_the_gpus_a_world_published(tmp_path):
    publish({"pid": os.getpid(), "np": 1,
             "ranks": [{"rank": 0, "host": "worker1", "engine_id": 0, "state": "idle"}],
             "gpus": {"worker1": h200("worker1").to_dict()}}, str(tmp_path))
    view = cluster_view(hosts="worker1:8", probe=False, check_reachable=False, state_dir=str(tmp_path))
    [host] = view.state.hosts
    assert host.engine_summary == "1 engine: 1 idle" and host.gpus is None  # not probed, as it says
    view.close()
    panel = CollectOptions(hosts="worker1:8", gpus="none", reach_timeout=None, state_dir=str(tmp_path),
                           published_gpus=True)
    [host] = StateCollector(panel)().hosts
    assert host.gpus.links["GPU0"]["GPU7"] == "NV18"


def test_an_ssh_client_that_cannot_be_split_is_each_remote_hosts_error(tmp_path):
    view = cluster_view(hosts="localhost:2,hgx1:8", ssh="'unclosed", check_reachable=False,
                        state_dir=str(tmp_path), timeout=3.0)
    local, hgx1 = view.state.hosts
    assert hgx1.gpus.error == "--ssh: cannot split \"'unclosed\": No closing quotation"
    assert local.gpus is not None and local.gpus.error is None  # this machine: probed in-process
    view.close()


# ---------------------------------------------------------------- a hostile doctor report (hypothesis)
SAVED_REPORT = {"hosts": ["worker0", "worker1"], "answered": 2, "seconds": 1.5,
                "counts": {"error": 1, "warning": 0, "info": 0}, "exit_status": 1,
                "findings": [{"severity": "error", "check": "software", "title": "numpy",
                              "hosts": ["worker1"],
                              "detail": "worker1: 1.0.0; worker0: 2.4.6", "fix": "",
                              "values": [{"value": "2.4.6", "hosts": ["worker0"]}]}],
                "shared": [{"check": "software", "title": "Python", "value": "3.11.7"}], "links": None,
                "checked_at": 1767225600.0}


@FUZZ
@given(hostile(SAVED_REPORT))
@example(replaced(SAVED_REPORT, ("checked_at",), float("nan")))   # old code: "NaN" served to the panel
def test_a_hostile_doctor_report_costs_the_health_column_at_most(doc):
    """The last doctor report, hand-edited or of another version: each host's health is read or
    left out, and what the panel is served stays strict JSON (no NaN, no Infinity)."""
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "doctor.json"), "w") as handle:
            handle.write(dumps(doc))
        health = read_health(folder)
    json.dumps(health, allow_nan=False)
    for entry in health.values():
        assert entry["state"] in ("ok", "warning", "error")
        assert all(isinstance(title, str) for title in entry["findings"])
        assert entry["checked_at"] is None or entry["checked_at"] >= 0
