"""engine/versions: an engine reads the versions it needs from the dist-info folder names on its
sys.path (the first one wins, as for importlib.metadata), without loading the email parser."""
import subprocess
import sys

from mlp_magic.engine import versions


def test_the_first_folder_on_the_path_wins_and_other_names_are_ignored(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, names in ((first, ["ipyparallel-8.8.0.dist-info", "ipyparallel_extra-1.0.dist-info"]),
                          (second, ["ipyparallel-9.2.0.dist-info", "IPyKernel-7.4.0.dist-info",
                                    "mpi4py-4.1.2.egg-info"])):
        for name in names:
            (folder / name).mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(first), str(second)])
    assert versions._from_folder_names(["ipyparallel", "ipykernel", "mpi4py"]) == {
        "ipyparallel": "8.8.0", "ipykernel": "7.4.0"}


def test_this_python_can_run_an_engine_and_reading_loads_no_email_parser():
    code = ("import sys; from mlp_magic.engine.versions import found_versions, refusal; "
            "found = found_versions(); "
            "print(refusal(0), 'email.parser' in sys.modules, found['ipyparallel'])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    from importlib import metadata
    assert done.stdout.split() == ["None", "False", metadata.version("ipyparallel")], done.stderr


def test_only_an_encrypted_worlds_engine_checks_for_curve():
    assert versions.curve_problem({}) == []
    assert versions.curve_problem({"IPP_CONNECTION_INFO": "{not json"}) == []
    assert versions.curve_problem({"IPP_CONNECTION_INFO": '{"curve_serverkey": null}'}) == []
    # this host's libzmq does CurveZMQ (the test extra's pyzmq wheel bundles it): no problem
    assert versions.curve_problem({"IPP_CONNECTION_INFO": '{"curve_serverkey": "k"}'}) == []
