"""doctor/pure/report and doctor/pure/checks: facts of hosts -> findings, folded, ordered, rendered."""
from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.doctor.pure.report import (ERROR, INFO, WARNING, Finding, Report, Shared, compare,
                                          health_by_host, render_html)
from mlp_magic.doctor.pure.checks import Context, check_hosts

HOSTS = [f"worker{i}" for i in range(4)]


def facts(**changes) -> dict:
    """One host's probe answer, healthy and CPU-only."""
    base = {"probe": 1, "hostname": "w", "time": 1000.0, "python": {"version": "3.11.7"},
            "env": {}, "problems": [],
            "packages": {name: {"version": "1.0", "file": f"/venv/lib/site-packages/{name}/__init__.py",
                                "installed": True, "extra": {}}
                         for name in ("mlp_magic", "numpy", "ipykernel", "ipyparallel", "mpi4py", "torch")},
            "host": {"shm": {"total": 8 << 30}, "disk": {"path": "/w", "free": 100 << 30},
                     "memlock": "unlimited", "nofile": 1 << 20, "ib": []},
            "gpus": {"source": "none", "error": "no GPUs", "gpus": [], "count": 0}}
    base.update(changes)
    return base


def report_of(per_host: dict, failures=None, **context) -> Report:
    return check_hosts(list(per_host) + list(failures or {}), per_host, failures or {}, Context(**context))


def by_title(report: Report) -> dict:
    return {f.title: f for f in report.findings}


def test_equal_values_are_shared_and_the_odd_host_is_named_against_the_majority():
    assert compare("software", "numpy", dict.fromkeys(HOSTS, "1.26")) == Shared("software", "numpy", "1.26")
    found = compare("software", "numpy", {"worker0": "1.26", "worker1": "1.26", "worker2": "1.0",
                                          "worker3": "1.26"})
    assert found.hosts == ("worker2",) and found.severity == ERROR
    assert found.detail == "worker2: 1.0; worker[0-1,3]: 1.26"
    assert found.values == (("1.26", ("worker0", "worker1", "worker3")), ("1.0", ("worker2",)))


def test_a_tie_names_every_host():
    found = compare("environment", "NCCL_DEBUG", {"a1": "INFO", "a2": None})
    assert set(found.hosts) == {"a1", "a2"} and found.detail == "a2: not set; a1: INFO"


@given(st.dictionaries(st.from_regex(r"node[0-9]{1,2}", fullmatch=True),
                       st.sampled_from(["1", "2", "3", None]), min_size=1, max_size=20))
def test_compare_partitions_the_hosts_majority_first(values):
    found = compare("c", "t", values)
    if len(set(values.values())) == 1:
        assert isinstance(found, Shared)
        return
    groups = [hosts for _, hosts in found.values]
    assert sorted(h for g in groups for h in g) == sorted(values)
    assert len(groups[0]) == max(len(g) for g in groups)
    tie = len(groups[0]) == len(groups[1])
    assert set(found.hosts) == (set(values) if tie else set(values) - set(groups[0]))
    json.dumps(found.to_json())


@given(st.lists(st.tuples(st.sampled_from([ERROR, WARNING, INFO]), st.text(max_size=20)), max_size=12))
def test_errors_come_first_and_decide_the_exit_status(items):
    report = Report(("h1", "h2"))
    for severity, title in items:
        report.add(Finding(severity, "check", title, ("h1",), "<seen & done>"))
    ranks = [[ERROR, WARNING, INFO].index(f.severity) for f in report.ordered()]
    assert ranks == sorted(ranks)
    assert report.exit_status == (1 if any(s == ERROR for s, _ in items) else 0)
    assert "<seen" not in render_html(report) and "Traceback" not in report.text
    assert json.loads(json.dumps(report.to_json()))["exit_status"] == report.exit_status


def test_the_odd_package_environment_and_unreachable_host():
    odd = facts(env={"NCCL_IB_DISABLE": "1"})
    odd["packages"]["numpy"].update(version="0.9", file="/shadow/numpy/__init__.py")
    report = report_of({"worker0": facts(), "worker1": odd, "worker2": facts()},
                       {"worker3": "unreachable: ssh: connect to host worker3 port 22: Connection refused"})
    found = by_title(report)
    assert found["numpy"].detail == "worker1: 0.9 (from /shadow/numpy/__init__.py); worker[0,2]: 1.0"
    assert found["NCCL_IB_DISABLE"].hosts == ("worker1",) and found["NCCL_IB_DISABLE"].severity == ERROR
    assert found["unreachable"].hosts == ("worker3",) and "start sshd" in found["unreachable"].fix
    assert report.exit_status == 1 and report.answered == 3
    assert report.text.index("unreachable") < report.text.index("All 3 hosts that answered share:")


def test_per_process_variables_are_not_compared():
    # and what Open MPI 5's launcher sets in every process (seen through a World's engines on an H100)
    launcher = {"OMPI_LIBDIR_LOC": "/venv/lib", "OMPI_MCA_PREFIXES": "mca,opal,ompi",
                "OMPI_TOOL_NAME": "mpiexec",
                "OMPI_MCA_cpu_type": "x86_64", "OMPI_VERSION": "5.0.11"}
    per_host = {h: facts(env={"OMPI_COMM_WORLD_RANK": str(i), "OMPI_MCA_btl": "tcp", **launcher})
                for i, h in enumerate(HOSTS)}
    report = report_of(per_host)
    assert report.findings == [] and Shared("environment", "OMPI_MCA_btl", "tcp") in report.shared
    assert [s.title for s in report.shared if s.check == "environment"] == ["OMPI_MCA_btl"]


def test_bad_input_becomes_findings():
    missing = facts()
    missing["packages"]["torch"] = {"version": None, "file": None, "installed": False}
    broken = facts()
    broken["packages"]["ipykernel"]["error"] = "RuntimeError: half-installed"
    per_host = {"a": facts(), "b": missing, "c": broken, "d": facts()}
    report = report_of(per_host, {"e": "exit 127: sh: 1: exec: /venv/bin/python: not found",
                                  "f": "unreachable: Host key verification failed.",
                                  "g": "exit 255: no message"},
                       asked_packages=("nosuch",))
    found = by_title(report)
    assert found["torch"].hosts == ("b",) and found["torch"].detail.startswith("b: not installed; ")
    assert found["import ipykernel"].hosts == ("c",) and "half-installed" in found["import ipykernel"].detail
    assert found["no Python"].hosts == ("e",) and "--python" in found["no Python"].fix
    assert "ssh-keygen -R" in found["unreachable"].fix
    assert found["ssh failed"].hosts == ("g",) and "run again" in found["ssh failed"].fix
    nosuch = found["package nosuch"]
    assert nosuch.severity == INFO and "is the name right?" in nosuch.detail
    health = health_by_host(dict(report.to_json(), checked_at=1.0))
    assert "package nosuch" not in health["a"]["findings"]   # a note on the request, not on host a


def test_host_limits_clock_and_disk():
    gpu = {"source": "replay", "error": None, "driver": "550", "count": 1,
           "gpus": [{"index": 0, "name": "H100", "xid": 0, "ecc_uncorrected": 0, "throttle": 0}]}
    small = facts(gpus=gpu, time=1000.0 + 30)
    small["host"].update(shm={"total": 64 << 20}, memlock=65536, nofile=1024)
    small["host"]["disk"]["free"] = 10 << 20
    report = report_of({"a": facts(gpus=gpu), "b": small, "c": facts(gpus=gpu)},
                       windows={h: (999.0, 1000.5) for h in "abc"})
    found = by_title(report)
    assert found["/dev/shm"].severity == ERROR and found["/dev/shm"].detail == "/dev/shm is 64 MiB"
    assert found["ulimit -l"].hosts == ("b",) and found["ulimit -l"].severity == WARNING
    assert found["ulimit -n"].detail == "1024 open files at most"
    assert found["clock"].detail.startswith("its clock is 29.5 s ahead of")
    assert found["free disk"].hosts == ("b",)


def test_gpu_health_from_the_replayed_readings():
    def gpus(count, **bad):
        return {"source": "replay", "error": None, "driver": "550.90.07", "count": count,
                "gpus": [dict({"index": i, "name": "H100", "xid": 0, "ecc_uncorrected": 0, "throttle": 4}, **(
                    bad if i == 0 else {})) for i in range(count)]}
    per_host = {"a": facts(gpus=gpus(2)), "b": facts(gpus=gpus(1, xid=79, ecc_uncorrected=3, throttle=0x48)),
                "c": facts(gpus=gpus(2))}
    found = by_title(report_of(per_host, expected_gpus=2))
    assert found["GPU count"].hosts == ("b",) and "MLP_WORKER_GPU=2" in found["GPU count"].detail
    assert found["XID error"].detail == "GPU 0: XID 79"
    assert found["uncorrected ECC"].detail == "GPU 0: 3 uncorrected ECC errors"
    assert found["throttling"].detail == "GPU 0: hardware slowdown, hardware thermal slowdown"
    assert "driver" not in found   # the same everywhere: shared


def test_a_check_the_probe_could_not_finish_is_a_warning():
    late = facts(problems=["gpus: not finished within 5 s"])
    found = by_title(report_of({"a": facts(), "b": late}))
    assert found["check not done"].hosts == ("b",) and found["check not done"].severity == WARNING


def _containers(inner):
    return st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)


LEAVES = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
JSON = st.recursive(LEAVES, _containers, max_leaves=12)


@given(st.dictionaries(st.sampled_from(["hosts", "findings", "checked_at", "x"]), JSON))
def test_any_saved_document_gives_a_health_map_never_an_error(document):
    from mlp_magic.doctor.pure.report import health_by_host

    health = health_by_host(document)
    assert all(entry["state"] in ("ok", "warning", "error") for entry in health.values())
