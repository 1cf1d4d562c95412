"""`mlp-magic topo` and `mlp-magic status`, run in-process (main(argv)) and as a real process."""
from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mlp_magic.cli import main
from mlp_magic.cluster.pure.model import cluster_state
from mlp_magic.cluster.text import status_text
from mlp_magic.core.results import FAILED, INTERRUPTED, OK, TIMEOUT, UNREACHABLE, HostResult
from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.gpu import parse_topo_matrix
from mlp_magic.gpu.collect import inventory_from_result
from mlp_magic.gpu.pure.model import parse_topo_answer

TOPO = Path(__file__).resolve().parents[2] / "fixtures" / "topo"
DGX1 = TOPO / "dgx1-v100-8gpu-2nic.txt"
H200 = TOPO / "hgx-h200-8gpu-12nic.txt"
NO_GPU_HERE = not (shutil.which("nvidia-smi") or os.path.exists("/dev/nvidiactl"))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_topo_json_from_saved_file(capsys):
    code, out, err = run(capsys, "topo", "--from-file", str(H200), "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert list(data) == ["hgx-h200-8gpu-12nic"]
    host = data["hgx-h200-8gpu-12nic"]
    assert len(host["gpus"]) == 8 and host["nics"] == ["mlx5_%d" % i for i in range(12)]
    assert host["links"]["GPU0"]["GPU3"] == "NV18"
    assert host["links"]["GPU2"]["mlx5_4"] == "PXB"
    assert host["links"]["mlx5_7"]["mlx5_8"] == "PIX"
    assert host["gpus"][5]["cpu_affinity"] == "56-111,168-223" and host["gpus"][5]["numa_node"] == 1


def test_topo_json_host_name_from_option(capsys):
    code, out, _ = run(capsys, "topo", "--from-file", str(DGX1), "--host", "worker7", "--json")
    links = json.loads(out)["worker7"]["links"]
    assert code == 0 and links["GPU2"]["mlx5_0"] == "PIX" and links["GPU0"]["GPU3"] == "NV1"


def test_topo_text_from_saved_file_reads_back(capsys):
    code, out, _ = run(capsys, "topo", "--from-file", str(DGX1))
    assert code == 0
    title, _, rest = out.partition("\n\n")
    assert title == "dgx1-v100-8gpu-2nic (nvidia-smi): 8 GPUs, 2 NICs"
    assert "GPU2    NV2   NV1    X    NV2   SYS   NV1   SYS   SYS   PIX     SYS     0-23,48-71    0" in rest
    assert parse_topo_matrix(rest).links == parse_topo_matrix(DGX1.read_text()).links


def test_topo_from_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(H200.read_text()))
    code, out, _ = run(capsys, "topo", "--from-file", "-", "--json")
    assert code == 0 and json.loads(out)["stdin"]["links"]["GPU4"]["mlx5_0"] == "SYS"


@pytest.mark.skipif(not NO_GPU_HERE, reason="this machine has an NVIDIA driver")
def test_topo_on_this_cpu_only_machine(capsys):
    code, out, _ = run(capsys, "topo")
    assert code == 0 and out == "%s: no GPU (CPU-only host)\n" % socket.gethostname()
    code, out, _ = run(capsys, "topo", "--json", "--host", "localhost")
    assert json.loads(out) == {"localhost": {"source": "none", "gpus": [], "nics": [], "links": {},
                                             "error": None}}


def test_malformed_saved_file_exits_2_with_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text(DGX1.read_text().replace("NV2\tSYS\tNV1\tSYS", "NV2\tSYS\tNVx\tSYS", 1))
    code, out, err = run(capsys, "topo", "--from-file", str(bad))
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert err.startswith("mlp-magic: %s, line 4: 'NVx' in row GPU2, column GPU5" % bad)


@pytest.mark.parametrize("argv, expected", [
    (["topo", "--from-file", "/nonexistent/topo.txt"], "mlp-magic: --from-file '/nonexistent/topo.txt': "
                                                       "no such file\n"),
    # a device is refused before a byte is read (it was read whole: 23 GiB, then the OOM killer)
    (["topo", "--from-file", "/dev/zero"], "mlp-magic: --from-file '/dev/zero': a device, not a file\n"),
    (["topo", "--bogus"], "mlp-magic topo: unknown option '--bogus' (see mlp-magic topo --help)\n"),
    (["topo", "--timeout", "soon"], "mlp-magic topo: --timeout: expected a positive number of seconds, "
                                    "got 'soon' (see mlp-magic topo --help)\n"),
    (["topo", "--timeout", "0"], "mlp-magic topo: --timeout: expected a positive number of seconds, got '0'"),
    (["topo", "--from-file"], "mlp-magic topo: --from-file needs a value (see mlp-magic topo --help)\n"),
    (["topo", "extra"], "mlp-magic topo: unexpected argument 'extra' (see mlp-magic topo --help)\n"),
    ([], "mlp-magic: give a command: topo, status, stacks, top, doctor, worlds, stop, dashboard "
         "(see mlp-magic --help)\n"),
    (["status", "--hostfile", "h", "-H", "a"], "mlp-magic status: give either --hostfile or -H, not both"),
    (["status", "--hostfile", "/nonexistent/hosts"], "mlp-magic: "),
    (["status", "-H", "bad host;rm"], "mlp-magic: "),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, expected):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith(expected) and err.count("\n") == 1


def test_status_json_for_a_host_list(capsys):
    code, out, err = run(capsys, "status", "-H", "localhost:3", "--json")
    assert code == 0, err
    status = json.loads(out)
    assert status["total_slots"] == 3
    [host] = status["hosts"]
    assert (host["name"], host["slots"], host["ranks"], host["reachable"]) == (
        "localhost", 3, [0, 1, 2], True)
    if NO_GPU_HERE:
        assert host["gpus"]["source"] == "none" and host["gpus"]["gpus"] == []


def test_status_text_with_an_unreachable_host(capsys, tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\n")
    code, out, err = run(capsys, "status", "--hostfile", str(hostfile))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("topology: hostfile")
    assert lines[0].endswith("1 host, 2 slots, master 127.0.0.1")
    assert lines[1].split() == ["HOST", "SLOTS", "RANKS", "REACHABLE", "GPUS"]
    assert lines[2].split()[:4] == ["localhost", "2", "0-1", "yes"]
    # pssh format, root@host:port: port 1 on loopback is closed, so the probe is refused at once.
    pssh = tmp_path / "pssh-hosts"
    pssh.write_text("root@127.0.0.1:1\n")
    code, out, err = run(capsys, "status", "--hostfile", str(pssh), "--timeout", "1")
    assert code == 0, err
    row = out.splitlines()[2]
    assert row.startswith("127.0.0.1  1      0      no (port 1: connection refused)")


def test_status_json_carries_gpus_and_hints_of_the_local_host():
    topology = topology_from_environment({}, hosts="localhost:8")
    local = parse_topo_matrix(DGX1.read_text(), host="localhost")
    state = cluster_state(topology, [local])
    status = state.to_json()
    [host] = status["hosts"]
    assert host["gpus"]["links"]["GPU0"]["GPU7"] == "NV2"
    assert host["hints"] == ["localhost: ranks 0-7 span NUMA nodes 0,1 "
                             "(node 0: ranks 0-3; node 1: ranks 4-7); "
                             "pin each rank to its GPU's CPUs (cpu_affinity) or memory and PCIe traffic "
                             "cross the socket"]
    text = status_text(state)
    assert "8 x GPU (nvidia-smi)" in text.splitlines()[2]
    assert text.splitlines()[3].startswith("hint: localhost: ranks 0-7 span NUMA nodes 0,1")


def test_status_of_a_host_that_could_not_be_probed():
    topology = topology_from_environment({}, hosts="worker0:2,worker1:2")
    said = "ssh: connect to host worker1 port 22: No route to host\n"
    failed = inventory_from_result(HostResult("worker1", UNREACHABLE, 255, "", said), 2.0)
    state = cluster_state(topology, [failed])
    status = state.to_json()
    worker0, worker1 = status["hosts"]
    assert worker0["gpus"] is None and worker1["gpus"]["gpus"] == []
    lines = status_text(state).splitlines()
    assert lines[2].split() == ["worker0", "2", "0-1", "?", "not", "probed"]
    assert lines[3].split(None, 4) == ["worker1", "2", "2-3", "?", "none (unreachable: %s)" % said.strip()]


def test_remote_topo_that_fails_exits_1_with_one_line(capsys):
    # `false` as the ssh client: nothing leaves this machine; a real ssh is in tests/multihost.
    code, out, err = run(capsys, "topo", "--host", "worker3", "--ssh", "false")
    assert (code, out, err) == (1, "", "mlp-magic: topo --host worker3: exit 1: no message\n")


# ------------------------------------------------------------- answers of `topo --json` over ssh

def test_topo_json_reads_back_under_the_name_the_cluster_gives(capsys):
    code, out, _ = run(capsys, "topo", "--from-file", str(H200), "--json")
    assert code == 0
    gpus = inventory_from_result(HostResult("gpu-node-7", OK, 0, out, ""), 5.0)
    assert gpus.host == "gpu-node-7" and gpus.error is None and gpus.source == "nvidia-smi"
    assert gpus.links == parse_topo_matrix(H200.read_text()).links
    assert gpus.gpus[5].cpu_affinity == "56-111,168-223" and len(gpus.nics) == 12


@pytest.mark.parametrize("result, error", [
    (HostResult("w", UNREACHABLE, 255, "", "ssh: connect to host 10.77.0.13 port 22: Connection refused\r\n"),
     "unreachable: ssh: connect to host 10.77.0.13 port 22: Connection refused"),
    (HostResult("w", UNREACHABLE, 255, "", ""), "unreachable: ssh could not connect"),
    (HostResult("w", TIMEOUT, None, "", ""), "timeout: no answer within 2.5 s"),
    (HostResult("w", INTERRUPTED, None, "", ""), "timeout: no answer within 2.5 s"),
    (HostResult("w", FAILED, 1, "", "Traceback (most recent call last):\n  ...\n"
                                    "ModuleNotFoundError: No module named 'mlp_magic'\n\n"),
     "exit 1: ModuleNotFoundError: No module named 'mlp_magic'"),
    (HostResult("w", FAILED, 2, "", "x" * 400), "exit 2: " + "x" * 297 + "..."),
    (HostResult("w", FAILED, 127, "", ""), "exit 127: no message"),
    (HostResult("w", OK, 0, "Welcome!\n{}", ""),
     "bad JSON: Expecting value: line 1 column 1 (char 0) (output starts 'Welcome!\\n{}')"),
    (HostResult("w", OK, 0, "[1, 2]", ""), "bad JSON: expected one host's object, got [1, 2]"),
    (HostResult("w", OK, 0, '{"a": {}, "b": {}}', ""),
     "bad JSON: expected one host's object, got {'a': {}, 'b': {}}"),
    (HostResult("w", OK, 0, '{"a": {"source": "cuda"}}', ""),
     "bad JSON: source 'cuda' is not one of nvml, nvidia-smi, none"),
])
def test_failed_answers_become_one_line_errors(result, error):
    gpus = inventory_from_result(result, 2.5)
    assert (gpus.host, gpus.source, gpus.gpus, gpus.error) == ("w", "none", [], error)


def test_an_answer_keeps_the_hosts_own_probe_error():
    answer = json.dumps({"node": {"source": "none", "gpus": [], "nics": [], "links": {},
                                  "error": "nvidia-smi: exit 9"}})
    assert parse_topo_answer("w", answer).error == "nvidia-smi: exit 9"
    # A field this version does not know: one line naming it (the exception text varies by Python).
    error = parse_topo_answer("w", '{"a": {"gpus": [{"idx": 0}]}}').error
    assert error.startswith("bad JSON: TypeError: ") and "'idx'" in error and "\n" not in error


def test_real_process_prints_json(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "topo", "--from-file", str(DGX1), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["dgx1-v100-8gpu-2nic"]["links"]["mlx5_0"]["mlx5_1"] == "SYS"
    done = subprocess.run([sys.executable, "-m", "mlp_magic.cli", "topo", "--from-file", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "mlp-magic: --from-file '%s': a folder, not a file\n" % tmp_path


def test_a_wrong_file_is_not_repeated_back(capsys, tmp_path):
    """/etc/passwd-like text: one short line naming the file and the line, not the file."""
    wrong = tmp_path / "accounts"
    wrong.write_text("".join(f"user{i}:x:{i}:{i}:user{i}:/home/user{i}:/bin/sh\n" for i in range(200)))
    code, out, err = run(capsys, "topo", "--from-file", str(wrong))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"mlp-magic: {wrong}, line 1: ") and len(err) < 400 and "user150" not in err
