"""doctor/probe: the per-host probe (standard library only, its answer, imports in a child) and the
answers read back. The doctor's options, one table for the command and the magic, are tested with
the other verbs' (tests/unit/commands/pure/test_parse_others.py)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from hypothesis import example, given

from mlp_magic.commands.pure.table import DOCTOR, options_for
from mlp_magic.doctor import probe
from mlp_magic.doctor.collect import parse_answer, probe_command
from mlp_magic.doctor.pure.answer import answer_problem
from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import dumps, hostile, replaced

STDLIB = frozenset(sys.stdlib_module_names)


def test_the_probe_imports_the_standard_library_only_at_its_top():
    tree = ast.parse(Path(probe.__file__).read_text())
    top = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import)
           for alias in node.names}
    top |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom)}
    assert top <= STDLIB and not any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree))


def test_the_probe_runs_from_its_source_alone_and_answers_json(tmp_path):
    command = probe_command(options_for(DOCTOR, timeout=20, no_import=True), str(tmp_path))
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60, cwd="/")
    facts = parse_answer(done.stdout)
    assert isinstance(facts, dict), (facts, done.stderr)
    assert facts["host"]["disk"]["path"] == str(tmp_path) and facts["packages"]["mlp_magic"]["installed"]
    assert "python" in facts and facts["problems"] == []


def test_an_import_that_crashes_python_names_its_package(tmp_path, monkeypatch):
    (tmp_path / "crashes.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    (tmp_path / "fine.py").write_text("__version__ = '3.2'\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    import time

    answers = probe.import_packages(["fine", "crashes"], time.monotonic() + 30)
    assert answers["fine"]["version"] == "3.2"
    assert answers["crashes"] == {"error": "import crashed Python (signal 11)"}


def test_answers_that_are_not_the_probes():
    assert parse_answer('motd line\n{"probe": 1, "x": 2}\n') == {"probe": 1, "x": 2}
    assert parse_answer("").startswith("bad answer: no JSON")
    assert parse_answer('{"probe": 1').startswith("bad answer: ")
    assert parse_answer('{"other": 1}') == "bad answer: not the probe's"


def test_the_probe_answer_is_plain_json(tmp_path):
    facts = probe.probe(["--timeout", "10", "--no-import", "--no-gpus", "--workdir", str(tmp_path)])
    assert json.loads(json.dumps(facts)) == facts


def test_the_link_tests_answer_through_mpiexecs_tags():
    from mlp_magic.doctor.links import _answer

    tagged = '[1,0]<stdout>: {"rank": 0, "backend": "gloo", "ranks": 2, "bytes": 8, "seconds": 0.5}\n'
    assert _answer([(tagged, "")])["backend"] == "gloo"
    assert _answer([("[0] {\"error\": \"rank 1: RuntimeError: refused\"}\n", "")]) == {
        "error": "rank 1: RuntimeError: refused"}
    assert _answer([("", "prterun: cannot start\n")]) == {
        "error": "the ranks gave no answer: prterun: cannot start"}


# ---------------------------------------------------------------- hostile answers (hypothesis)
GPU = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "power_limit_w": 700.0,
       "pci_bus_id": "0000:04:00.0", "util": 0, "mem_used_mib": 0, "temp_c": 30, "power_w": 70.5,
       "throttle": 0, "xid": 0, "ecc_uncorrected": 0, "mig": 0, "persistence": 1, "retired_pending": 0,
       "remap_failed": 0}
FACTS = {"probe": 1, "hostname": "worker0", "time": 1767225600.0, "seconds": 0.8, "problems": [],
         "python": {"executable": "/usr/bin/python3", "version": "3.11.7"},
         "env": {"NCCL_IB_DISABLE": "0", "CUDA_VISIBLE_DEVICES": "0,1"},
         "packages": {"numpy": {"version": "2.4.6", "file": "/opt/numpy/__init__.py", "installed": True,
                                "extra": {}},
                      "torch": {"version": "2.3.0", "file": "/opt/torch/__init__.py", "installed": True,
                                "extra": {"cuda": "12.1", "nccl": "2.20.5"}},
                      "mpi4py": {"version": None, "file": None, "installed": False}},
         "host": {"shm": {"path": "/dev/shm", "total": 64 << 30, "free": 64 << 30},
                  "disk": {"path": "/work", "total": 1 << 40, "free": 1 << 39}, "memlock": "unlimited",
                  "nofile": 1048576, "ib": [{"device": "mlx5_0", "port": "1", "state": "4: ACTIVE",
                                             "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand"}]},
         "gpus": {"source": "nvml", "error": None, "driver": "550.54.15", "count": 2,
                  "gpus": [GPU, dict(GPU, index=1, pci_bus_id="0000:23:00.0")],
                  "affinity": {"nics": ["mlx5_0"], "far": None}},
         "xid_log": []}


def _report(text: str):
    from mlp_magic.doctor.pure.checks import Context, check_hosts

    facts, failures = {"worker1": FACTS}, {}
    answer = parse_answer(text)
    if isinstance(answer, dict):
        facts["worker0"] = answer
    else:
        failures["worker0"] = answer
    windows = {"worker0": (1767225599.0, 1767225601.0), "worker1": (1767225599.0, 1767225601.0)}
    return check_hosts(["worker0", "worker1"], facts, failures, Context(expected_gpus=2, windows=windows))


@FUZZ
@given(hostile(FACTS))
@example(replaced(FACTS, ("time",), 10 ** 400))   # old code: OverflowError (int too large for a float)
@example(replaced(FACTS, ("host", "shm", "total"), 10 ** 400))   # old code: OverflowError in its size
@example(replaced(FACTS, ("gpus", "gpus", 0, "mig"), []))   # old code: TypeError (unhashable)
@example(replaced(FACTS, ("packages", "numpy", "error"), 0.5))   # old code: TypeError ("deadline" in 0.5)
@example(replaced(FACTS, ("python",), []))   # old code: AttributeError
@example(replaced(FACTS, ("xid_log",), [None]))   # old code: TypeError in "; ".join
def test_a_hostile_answer_is_that_hosts_bad_answer_and_the_others_are_checked(doc):
    """A host's probe answered what JSON allows (another version's probe, a shell profile that
    printed JSON, a hand): that host's answer is read, or it is one "bad answer" naming what is
    wrong; the report of all hosts is made, shown and saved as strict JSON in any case."""
    report = _report(dumps(doc))
    assert report.text and report.html
    json.dumps(report.to_json(), allow_nan=False)
    for finding in report.findings:
        if finding.check == "reachability":
            assert finding.hosts == ("worker0",) and finding.detail.startswith("bad answer: ")


IMPORT_LINES = [{"start": "numpy"}, {"name": "numpy", "version": "2.4.6", "file": "/opt/numpy/__init__.py",
                                     "extra": {}}, {"start": "torch"}]


@FUZZ
@given(hostile(IMPORT_LINES))
@example(replaced(IMPORT_LINES, (0,), float("inf")))   # old code: TypeError ("start" in inf) ends the reader
@example(replaced(IMPORT_LINES, (2, "start"), []))   # old code: kept (TypeError as a key later)
@example(replaced(IMPORT_LINES, (1, "file"), float("nan")))   # old code: kept (the doctor refuses the answer)
def test_what_a_package_prints_on_import_is_not_taken_for_the_import_childs_answer(lines):
    """The import child's stdout is also the packages' own (a print on import): a line of JSON
    that is not one of its messages is passed over, and the reader goes on to the end."""
    answers, current = {}, [None]
    probe._read_imports(SimpleNamespace(stdout=[dumps(line) + "\n" for line in lines]), answers, current)
    assert isinstance(current[0], (str, type(None))) and all(isinstance(name, str) for name in answers)
    probe._read_imports(SimpleNamespace(stdout=['{"name": "ipykernel"}\n']), answers, current)
    assert "ipykernel" in answers and current[0] is None
    facts = probe.merge_packages({"numpy": {"version": "2.4.6", "file": None, "installed": True}}, answers)
    assert answer_problem({"probe": 1, "packages": facts}) is None   # what the doctor reads of it
