"""The panel's health column: the doctor saves its last report in the state folder, the cluster
collector reads it into each host row (doctor/pure/report.health_by_host), status --json and the
panel get it."""
from __future__ import annotations

import json
import os
import stat

from mlp_magic.cluster.collect import CollectOptions, StateCollector
from mlp_magic.doctor.pure.report import ERROR, INFO, WARNING, Finding, Report, health_by_host
from mlp_magic.doctor.command import save_report


def report() -> Report:
    found = Report(("worker0", "worker1", "worker2"))
    found.add(Finding(ERROR, "software", "numpy", ("worker2",), "worker2: 1.0.0; worker[0-1]: 2.4.6"))
    found.add(Finding(WARNING, "host", "ulimit -n", ("worker1", "worker2"), "1024 open files at most"))
    found.add(Finding(INFO, "gpus", "persistence mode", ("worker0",), "off"))
    return found


def test_each_host_gets_its_worst_finding_notes_do_not_count():
    health = health_by_host(dict(report().to_json(), checked_at=5.0))
    assert health == {"worker0": {"state": "ok", "findings": [], "checked_at": 5.0},
                      "worker1": {"state": "warning", "findings": ["ulimit -n"], "checked_at": 5.0},
                      "worker2": {"state": "error", "findings": ["numpy", "ulimit -n"], "checked_at": 5.0}}
    assert health_by_host({"hosts": "nonsense", "findings": None}) == {}
    assert health_by_host({"hosts": ["a", 3], "findings": [7, {"severity": "error", "hosts": "a"}]}) == {
        "a": {"state": "ok", "findings": [], "checked_at": None}}


def test_the_saved_report_reaches_the_host_rows(tmp_path):
    state_dir = str(tmp_path / "state")
    save_report(report(), {"MLP_MAGIC_STATE_DIR": state_dir})
    path = os.path.join(state_dir, "doctor.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(state_dir).st_mode) == 0o700
    options = CollectOptions(hosts="worker0,worker2,worker9", gpus="none", state_dir=state_dir, timeout=0.5)
    state = StateCollector(options)()
    rows = {host["name"]: host["health"] for host in state.to_json()["hosts"]}
    assert rows["worker0"]["state"] == "ok" and rows["worker2"]["state"] == "error"
    assert rows["worker9"] is None   # never checked
    json.dumps(state.to_json())


def test_an_unreadable_or_garbled_report_costs_the_column_only(tmp_path):
    (tmp_path / "doctor.json").write_text("{not json")
    options = CollectOptions(hosts="worker0", gpus="none", state_dir=str(tmp_path), timeout=0.5)
    assert StateCollector(options)().to_json()["hosts"][0]["health"] is None
    (tmp_path / "blocked").write_text("a file, not a folder")
    save_report(report(), {"MLP_MAGIC_STATE_DIR": str(tmp_path / "blocked")})   # nothing raised
