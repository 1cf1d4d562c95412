"""``mlp-magic doctor`` on this machine: the real probe in a process of its own, bad input as findings
(an unknown package, no Python, a module whose import raises or hangs), the exit status, --json, the
link test on 4 local ranks with gloo, and ``%mlp_doctor`` through a live World's engines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from tests import worlds
from tests.timing import hang_bound

from tests.integration.conftest import child_pids, run

pytestmark = pytest.mark.timeout(240)


def doctor(*args, env=None, timeout=180):
    environ = dict(os.environ, **(env or {}))
    for name in ("MLP_MPI_HOSTS", "MLP_MPI_HOSTFILE", "MLP_WORKER_GPU", "MLP_MAGIC_NVML_REPLAY"):
        if not env or name not in env:
            environ.pop(name, None)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "doctor", *args], env=environ,
                          capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in done.stdout + done.stderr
    return done, time.monotonic() - started


def findings(done) -> dict:
    return {(f["check"], f["title"]): f for f in json.loads(done.stdout)["findings"]}


def test_this_machine_alone_with_an_unknown_package_is_a_note_and_exit_0():
    done, _ = doctor("--json", "--no-import", "--package", "no-such-package-xyz")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["hosts"] == ["localhost"] and report["exit_status"] == 0
    unknown = findings(done)[("software", "package no-such-package-xyz")]
    # a note on the request, not on the host: the host's health (status --json, the panel) stays ok
    assert unknown["severity"] == "info" and "is the name right?" in unknown["detail"]
    shared = {s["title"] for s in report["shared"]}
    assert {"Python", "mlp_magic", "torch", "GPU count", "/dev/shm size"} <= shared


def test_no_python_on_the_host_is_an_error_finding_and_exit_1():
    done, took = doctor("--json", "--python", "/nonexistent/bin/python3", "--timeout", "5")
    assert done.returncode == 1
    missing = findings(done)[("reachability", "no Python")]
    assert missing["hosts"] == ["localhost"] and "exit 127" in missing["detail"]
    assert took < hang_bound(5 + 1)   # the 5 s deadline at most, never a hang


def test_a_broken_module_and_a_hanging_one_are_findings_within_the_deadline(tmp_path):
    for name, body in (("ipykernel", "raise ImportError('libzmq.so.5: cannot open shared object file')\n"),
                       ("hangs_on_import", "import time\ntime.sleep(600)\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(body)
    before = child_pids()
    done, took = doctor("--json", "--timeout", "6", "--package", "hangs_on_import",
                        env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 1
    found = findings(done)
    assert found[("software", "import ipykernel")]["detail"] == (
        "ipykernel is installed but `import ipykernel` fails: ImportError: libzmq.so.5: cannot open shared "
        "object file")
    late = found[("software", "import hangs_on_import")]
    assert late["severity"] == "warning" and "deadline" in late["detail"]
    assert took < hang_bound(6 + 1), took   # the 6 s deadline, not the 600 s import
    left = [p for p in psutil.process_iter(["cmdline"])
            if "hangs_on_import" in " ".join(p.info["cmdline"] or [])]
    assert left == [] and child_pids() - before == set()


def test_bad_options_are_one_line_and_exit_2():
    for args in (["--timeout", "-1"], ["--package", "bad name!"], ["--fraction", "2"], ["--np", "1"]):
        done, _ = doctor(*args)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"mlp-magic doctor: {args[0]}: "), done.stderr   # the option named
        assert repr(args[1]) in done.stderr, done.stderr                                   # and its value


def test_text_report_errors_first_then_what_is_shared():
    done, _ = doctor("--no-import", env={"MLP_WORKER_GPU": "8"})
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith("mlp-magic doctor: 1 host (localhost) in ")
    assert lines[2] == "ERROR gpus: GPU count [localhost]"
    assert lines[3].strip() == "0 GPUs seen, MLP_WORKER_GPU=8"
    assert "The host that answered:" in lines


def test_links_on_four_local_ranks_with_gloo_give_a_bandwidth():
    before = child_pids()
    done, took = doctor("-H", "localhost:4", "--links", "--no-import", "--size", "2", "--json")
    print(f"--links, 4 local ranks: {took:.1f} s")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    links = report["links"]
    assert links["backend"] == "gloo" and links["ranks"] == 4 and links["bytes"] == 2_000_000
    assert links["busbw_gbps"] == pytest.approx(links["algbw_gbps"] * 2 * 3 / 4, rel=1e-3)
    assert links["busbw_gbps"] > 0 and links["pairs"] == []   # one host: no pair of hosts
    shared = {s["title"]: s["value"] for s in report["shared"]}
    assert shared["all_reduce gloo"].startswith("busbw ") and "(4 ranks, 2 MB)" in shared["all_reduce gloo"]
    assert child_pids() - before == set()


@pytest.mark.parametrize("how", ["asked", "no torch"])
def test_links_over_the_jobs_mpi_give_a_bandwidth(how, tmp_path):
    """``--links-backend mpi``, or ``auto`` in an image without torch (a torch that fails to
    import, first on the ranks' path): the bytes move through mpi4py under the job's mpiexec."""
    before = child_pids()
    env = None
    args = ["--links-backend", "mpi"] if how == "asked" else []
    if how == "no torch":
        (tmp_path / "torch").mkdir()
        (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('no torch in this image')\n")
        env = {"PYTHONPATH": os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)}
    done, took = doctor("-H", "localhost:4", "--links", "--no-import", "--size", "2", "--json", *args,
                        env=env)
    print(f"--links over MPI ({how}), 4 local ranks: {took:.1f} s")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    links = report["links"]
    assert links["backend"] == "mpi" and links["ranks"] == 4 and links["bytes"] == 2_000_000
    assert links["busbw_gbps"] > 0 and links["pairs"] == []
    shared = {s["title"]: s["value"] for s in report["shared"]}
    assert "(4 ranks, 2 MB)" in shared["all_reduce mpi"]
    if how == "no torch":   # decided once, before any rank started, and said
        why = "torch.distributed does not import: ImportError: no torch in this image"
        assert links["backend_why"] == why
        assert shared["not torch"] == links["backend_why"]
    else:
        assert "backend_why" not in links and "not torch" not in shared
    assert child_pids() - before == set()


def test_links_over_mpi_without_mpiexec_is_one_error_finding():
    before = child_pids()
    done, _ = doctor("-H", "localhost:2", "--links", "--no-import", "--links-backend", "mpi", "--json",
                     env={"MLP_MAGIC_MPIEXEC": "none"})
    assert done.returncode == 1, done.stdout + done.stderr
    failed = findings(done)[("links", "collective test")]
    assert failed["severity"] == "error" and "needs ranks started by mpiexec" in failed["detail"]
    assert "passed over" not in failed["detail"]   # MPI was asked for, not fallen back to
    assert child_pids() - before == set()


def no_process_of_our_own(*args, **kwargs):
    raise AssertionError("the doctor started its own process: the World's engines were not used")


_KEPT: dict = {}   # in the kernel: the doctor's own process starter while it is replaced


def _no_runner_of_its_own() -> None:
    """In the kernel: the doctor may start no process of its own."""
    from mlp_magic.doctor import collect

    _KEPT["shell"] = collect.Shell
    collect.Shell = no_process_of_our_own


def _its_runner_back() -> None:
    from mlp_magic.doctor import collect

    collect.Shell = _KEPT.pop("shell")


def test_the_magic_goes_through_the_live_worlds_engines(ip, monkeypatch, capsys):
    if worlds.current_world() is None:
        assert run(ip, "%%mpirun -np 2\npass") is None

    ip.call(_no_runner_of_its_own)   # in the kernel, where the magic runs
    try:
        for name in ("MLP_MPI_HOSTS", "MLP_MPI_HOSTFILE", "MLP_WORKER_GPU"):
            monkeypatch.delenv(name, raising=False)
        capsys.readouterr()
        assert ip.run_cell("%mlp_doctor --json --no-import").success
        report = json.loads(capsys.readouterr().out)
        assert report["hosts"] == ["localhost"] and report["answered"] == 1
        assert {"Python", "torch", "GPU count"} <= {s["title"] for s in report["shared"]}
        result = ip.run_cell("%mlp_doctor --timeout nope")
        assert "--timeout" in str(result.error_in_exec) and "Traceback" not in capsys.readouterr().out
    finally:
        ip.call(_its_runner_back)


def test_sigterm_stops_the_probes_and_their_imports(tmp_path):
    (tmp_path / "hangs_on_import").mkdir()
    (tmp_path / "hangs_on_import" / "__init__.py").write_text("import time\ntime.sleep(600)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    env.pop("MLP_MPI_HOSTS", None)
    command = subprocess.Popen([sys.executable, "-m", "mlp_magic.cli", "doctor", "--timeout", "60",
                                "--package", "hangs_on_import"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _hanging():
        time.sleep(0.1)
    assert _hanging(), "the import never started"
    command.terminate()
    out, err = command.communicate(timeout=30)
    assert command.returncode == 130 and err == "mlp-magic: interrupted\n" and "Traceback" not in out
    deadline = time.monotonic() + 10
    while _hanging() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _hanging() == []


def _hanging() -> list:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if "hangs_on_import" in line and "mlp_magic.cli" not in line:
            found.append(process.pid)
    return found
