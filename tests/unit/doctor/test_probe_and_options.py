"""doctor/probe: the per-host probe (standard library only, its answer, imports in a child) and the
answers read back. The doctor's options, one table for the command and the magic, are tested with
the other verbs' (tests/unit/commands/pure/test_parse_others.py)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from mlp_magic.commands.pure.table import DOCTOR, options_for
from mlp_magic.doctor import probe
from mlp_magic.doctor.collect import parse_answer, probe_command

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
