"""engine/versions: an engine reads the versions it needs from the dist-info folder names on its
sys.path (the first one wins, as for importlib.metadata), without loading the email parser."""
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.engine import versions
from tests.unit.fuzz_checks import FUZZ
from tests.unit.hostile_json import HOSTILE_VALUES, dumps, hostile


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


# an engine's connection info as ipyparallel writes it for an encrypted World
CONNECTION_INFO = {"ssh": "", "interface": "tcp://10.0.0.1", "registration": 55002, "control": 55003,
                   "mux": 55004, "hb_ping": 55005, "hb_pong": 55006, "task": 55007, "iopub": 55008,
                   "key": "1c2b7e4a-5f0e", "location": "worker0", "pack": "json", "unpack": "json",
                   "signature_scheme": "hmac-sha256",
                   "curve_serverkey": "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"}


@FUZZ
@given(hostile(CONNECTION_INFO) | st.sampled_from(HOSTILE_VALUES))
def test_a_hostile_connection_info_is_an_answer_never_a_traceback(info):
    """IPP_CONNECTION_INFO holds what JSON allows (no connection info of ours, a hand): the
    engine's check still answers, a list of one-line problems."""
    found = versions.curve_problem({"IPP_CONNECTION_INFO": dumps(info)})
    assert isinstance(found, list) and all(isinstance(line, str) and "\n" not in line for line in found)
