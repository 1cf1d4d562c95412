"""The declared floors are true: constraints/floors.txt is pyproject.toml's floors, pinned
(scripts/test-floors.sh installs it and runs the tests there); requires-python is the lowest
version whose syntax and standard library the package uses (vermin)."""
import os
import re
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import floors  # noqa: E402

# Guarded by hasattr (debugging/rank/postmortem: Python 3.12 keeps sys.last_exc too), so not a floor.
GUARDED = ["sys.last_exc"]


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        return tomllib.load(handle)


def test_the_constraints_file_is_pyprojects_floors():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "floors.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_floor_is_pinned_and_nothing_else():
    project = {"project": {
        "dependencies": ["a>=1.2,<2", "b[x]>=0.7", "c", "d_E.f>=3 ; python_version<'3.12'"],
        "optional-dependencies": {"t": ["a>=1.2", "g"]}}}
    assert floors.constraints(project).splitlines()[2:] == ["a==1.2", "b==0.7", "d-e-f==3"]
    with pytest.raises(ValueError, match="a has two floors, 1.2 and 1.3"):
        floors.constraints({"project": {"dependencies": ["a>=1.2"],
                                        "optional-dependencies": {"t": ["a>=1.3"]}}})
    assert floors.release("7") == floors.release("7.0.0") != floors.release("7.0.1")


def _vermin() -> subprocess.CompletedProcess:
    argv = [os.path.join(os.path.dirname(sys.executable), "vermin"), "--no-tips", "--backport", "typing",
            "--eval-annotations"]
    for rule in GUARDED:
        argv += ["--exclude", rule]
    return subprocess.run(argv + [os.path.join(ROOT, "mlp_magic")], capture_output=True, text=True,
                          timeout=300)


def test_requires_python_is_the_lowest_version_the_package_can_run_on():
    """vermin's minimum over every module is the declared floor: nothing needs a later Python, and
    something needs that one (the floor is not set too high)."""
    declared = re.fullmatch(r">=(3\.\d+)", _project()["project"]["requires-python"]).group(1)
    runs = _vermin()
    needed = re.search(r"^Minimum required versions: (\S+)$", runs.stdout, re.M)
    assert runs.returncode == 0 and needed, runs.stdout + runs.stderr
    assert needed.group(1) == declared, runs.stdout


def test_what_an_engine_checks_is_what_pyproject_declares():
    from mlp_magic.engine.pure.versions import ENGINE_NEEDS, PYTHON

    project = _project()["project"]
    assert project["requires-python"] == f">={PYTHON.floor}"
    declared = {}
    for requirement in project["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)(?:,<([0-9.]+))?", requirement)
        if match:
            declared[match.group(1)] = (match.group(2), match.group(3))
    for need in ENGINE_NEEDS:
        assert declared[need.name] == (need.floor, need.below), need
