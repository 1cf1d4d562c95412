"""``allrun`` across the namespace hosts of the test bed: real sshd, real OpenSSH client.

Each test runs the real console script (``python -m mlp_magic.allrun.command``) as a subprocess,
with ``MLP_MAGIC_SSH=ssh -F <test bed config>`` and a private ControlPath directory.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mlp_magic.core.host_command import BACKGROUND_GRACE_S, LEFT_IN_THE_BACKGROUND
from tests.timing import HANG_FLOOR_S, hang_bound

HOSTS = "worker[0-3]"
STARTUP_S = 1.0   # interpreter start and ssh handshakes, usually (bounds: tests/timing.py)


def allrun_env(bed, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLP_", "SLURM_", "OMPI_", "PMI_", "AZ_BATCH"))
           and k not in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "NO_COLOR")}
    env.update(bed.env())
    env["MLP_MAGIC_SSH"] = " ".join(bed.ssh_command())
    env.update(extra)
    return env


def allrun(bed, *args, env=None, timeout=60, prefix=()):
    started = time.monotonic()
    done = subprocess.run([*prefix, sys.executable, "-m", "mlp_magic.allrun.command", *args],
                          env=env or allrun_env(bed), capture_output=True, text=True, timeout=timeout)
    done.seconds = time.monotonic() - started
    return done


def from_a_removed_folder(tmp_path) -> tuple:
    """A ``prefix`` for ``allrun``: it starts in a folder that no host has (removed just before:
    the namespace hosts share this file system), so each host runs in its own home
    (core/host_command's folder rule)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    return ("sh", "-c", 'cd "$0" && rmdir "$0" && exec "$@"', str(gone))


def by_host(done) -> dict:
    return {entry["host"]: entry for entry in json.loads(done.stdout)}


def leftover(bed, command: str) -> list:
    """Live processes running exactly ``command`` (e.g. "sleep 100"), per host."""
    return [(h.name, line) for h in bed.hosts for _, line in bed.processes_on(h.index) if line == command]


def wait_gone(bed, needle: str, seconds: float = HANG_FLOOR_S) -> list:
    deadline = time.monotonic() + seconds
    while leftover(bed, needle) and time.monotonic() < deadline:
        time.sleep(0.1)
    return leftover(bed, needle)


def test_hostname_differs_per_host(healthy_testbed):
    done = allrun(healthy_testbed, "--json", "-H", HOSTS, "--", "hostname")
    assert done.returncode == 0, done.stderr
    results = by_host(done)
    assert list(results) == [f"worker{i}" for i in range(4)]
    for name, entry in results.items():
        assert (entry["status"], entry["exit_code"], entry["stdout"]) == ("ok", 0, f"{name}\n")


def test_identical_output_is_grouped_under_a_node_set(healthy_testbed):
    done = allrun(healthy_testbed, "-H", HOSTS, "--", "echo same on all")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("same on all") == 1
    assert "worker[0-3] (4)" in done.stdout


def test_one_host_down_is_unreachable_and_the_others_complete(healthy_testbed):
    bed, connect_timeout, command_time = healthy_testbed, 3, 1
    with bed.host_down(2):
        done = allrun(bed, "--json", "-H", HOSTS, "--connect-timeout", str(connect_timeout),
                      "--", f"echo out-$(hostname); echo err-$(hostname) >&2; sleep {command_time}")
    assert done.seconds < hang_bound(connect_timeout + command_time + STARTUP_S)   # the down host holds none
    assert done.returncode == 255
    results = by_host(done)
    assert results["worker2"]["status"] == "unreachable"
    assert "Connection refused" in results["worker2"]["stderr"]
    for name in ("worker0", "worker1", "worker3"):
        entry = results[name]
        assert (entry["status"], entry["exit_code"]) == ("ok", 0)
        assert (entry["stdout"], entry["stderr"]) == (f"out-{name}\n", f"err-{name}\n")


def test_blackholed_host_gives_up_after_the_connect_timeout(healthy_testbed):
    """No answer at all (link down), even with a reused connection from an earlier call."""
    bed, connect_timeout = healthy_testbed, 2
    assert allrun(bed, "-H", HOSTS, "--", "true").returncode == 0   # leaves ssh masters behind
    with bed.host_blackholed(3):
        done = allrun(bed, "--json", "-H", HOSTS, "--connect-timeout", str(connect_timeout), "--", "hostname")
    assert done.returncode == 255
    results = by_host(done)
    assert results["worker3"]["status"] == "unreachable"
    assert [results[f"worker{i}"]["stdout"] for i in range(3)] == [f"worker{i}\n" for i in range(3)]
    # ssh's ConnectTimeout, or our connect deadline (+2 s grace) for a reused connection
    assert done.seconds < hang_bound(connect_timeout + 2 + STARTUP_S)   # not TCP's own minutes


def test_command_failing_on_one_host_only(healthy_testbed):
    script = 'echo same; if [ "$(hostname)" = worker1 ]; then echo broken >&2; exit 3; fi'
    done = allrun(healthy_testbed, "-H", HOSTS, "--", script)
    assert done.returncode == 3
    assert "worker[0,2-3] (3)" in done.stdout
    assert "worker1 (1) [exit 3]" in done.stdout
    assert done.stdout.count("broken") == 1
    as_json = by_host(allrun(healthy_testbed, "--json", "-H", HOSTS, "--", script))
    assert as_json["worker1"]["status"] == "failed" and as_json["worker1"]["exit_code"] == 3
    assert {as_json[f"worker{i}"]["status"] for i in (0, 2, 3)} == {"ok"}


def test_a_command_exiting_255_is_failed_not_unreachable(healthy_testbed):
    done = allrun(healthy_testbed, "--json", "-H", HOSTS, "--", "echo here; exit 255")
    assert done.returncode == 255
    outcomes = {(e["status"], e["exit_code"], e["stdout"]) for e in by_host(done).values()}
    assert outcomes == {("failed", 255, "here\n")}


def test_timeout_kills_the_remote_command_on_every_host(healthy_testbed):
    bed = healthy_testbed
    done = allrun(bed, "--json", "-H", HOSTS, "-t", "2", "--", "echo started; sleep 100")
    assert done.returncode == 255
    assert done.seconds < hang_bound(2 + STARTUP_S)   # the 2 s timeout, not the 100 s command
    for entry in by_host(done).values():
        assert (entry["status"], entry["stdout"]) == ("timeout", "started\n")
    assert wait_gone(bed, "sleep 100") == []


@pytest.mark.parametrize("connection", ["shared", "own"])
def test_a_process_left_in_the_background_is_not_waited_for(healthy_testbed, connection):
    """As a terminal, and as allrun on this machine: the command's end is the end. ssh itself
    waits for the channel, which the ``sleep`` holds; the wrapper's end marker says the command
    ended, with its status. Through a ControlMaster, and through an ssh of its own."""
    bed = healthy_testbed
    env = allrun_env(bed)
    if connection == "own":   # ssh keeps the first of options given twice: these win
        env["MLP_MAGIC_SSH"] += " -o ControlMaster=no -o ControlPath=none"
    try:
        done = allrun(bed, "--json", "-H", HOSTS, "--", "sleep 106 & echo bg-$(hostname); exit 3",
                      env=env, timeout=40)
        assert done.seconds < hang_bound(BACKGROUND_GRACE_S + STARTUP_S), done.stderr
        assert done.returncode == 3, done.stderr
        for name, entry in by_host(done).items():
            assert (entry["status"], entry["exit_code"], entry["stdout"]) == ("failed", 3, f"bg-{name}\n")
            assert entry["stderr"] == LEFT_IN_THE_BACKGROUND
        assert len(leftover(bed, "sleep 106")) == 4   # left running, as a terminal leaves it
    finally:
        for index in range(len(bed.hosts)):
            for pid, line in bed.processes_on(index):
                if line == "sleep 106":
                    os.kill(pid, signal.SIGKILL)


def test_timeout_kills_a_command_that_ignores_sigterm(healthy_testbed):
    bed = healthy_testbed
    done = allrun(bed, "--json", "-H", HOSTS, "-t", "1", "--", "trap '' TERM; echo started; sleep 101")
    assert done.returncode == 255
    assert {e["status"] for e in by_host(done).values()} == {"timeout"}
    assert wait_gone(bed, "sleep 101") == []


def test_ctrl_c_keeps_partial_output_and_stops_remote_commands(healthy_testbed):
    bed = healthy_testbed
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlp_magic.allrun.command", "-H", HOSTS, "--",
         "echo started-$(hostname); sleep 102"],
        env=allrun_env(bed), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while len(leftover(bed, "sleep 102")) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(leftover(bed, "sleep 102")) == 4
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert time.monotonic() - sent < hang_bound(STARTUP_S)   # soon after the Ctrl-C, not after 102 s
    assert proc.returncode == 130
    for i in range(4):
        assert f"worker{i} (1) [interrupted]" in out and f"started-worker{i}" in out
    assert "not finished: worker[0-3]" in err
    assert wait_gone(bed, "sleep 102") == []


def test_bad_host_names_exit_2_and_run_nothing(healthy_testbed, tmp_path):
    bed = healthy_testbed
    touch = f"touch {tmp_path}/ran-$(hostname)"
    bad = [
        ("-H", "worker0,bad;name"),
        ("-H", "worker0,$(reboot)"),
        ("-H", ""),
        ("-H", HOSTS, "-x", HOSTS),
        ("-H", HOSTS, "-x", "worker9"),
    ]
    for options in bad:
        done = allrun(bed, *options, "--", touch)
        assert done.returncode == 2, (options, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("allrun: ")
        assert done.stdout == ""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("worker0 slots=2\nworker1 slots=two\n")
    done = allrun(bed, "--hostfile", str(hostfile), "--", touch)
    assert done.returncode == 2 and "line 2" in done.stderr and "two" in done.stderr
    assert list(tmp_path.glob("ran-*")) == []


@pytest.mark.parametrize("fanout", ["64", "1"])   # names checked while connecting / before
def test_unknown_host_name_exits_2_and_runs_nothing(healthy_testbed, tmp_path, fanout):
    """Run from inside worker0's namespace: a name lookup there cannot leave the test bed."""
    bed = healthy_testbed
    prefix = ("ip", "netns", "exec", bed.hosts[0].netns)
    done = allrun(bed, "-f", fanout, "-H", "worker1,nosuchhost-mlpt,worker2", "--",
                  f"touch {tmp_path}/ran-$(hostname)", prefix=prefix)
    assert done.returncode == 2, done.stderr
    assert "nosuchhost-mlpt" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.glob("ran-*")) == []
    # the same command with known names does run from there
    done = allrun(bed, "-H", "worker1,worker2", "--", f"touch {tmp_path}/ran-$(hostname)", prefix=prefix)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.glob("ran-*")) == ["ran-worker1", "ran-worker2"]


def test_copy_puts_the_file_in_every_hosts_own_home(healthy_testbed, tmp_path):
    bed = healthy_testbed
    payload = tmp_path / "payload.sh"
    payload.write_bytes(b"#!/bin/sh\necho payload \xe2\x9c\x93\n")
    payload.chmod(0o750)
    done = allrun(bed, "--json", "-H", HOSTS, "--copy", str(payload), "mlpt-payload.sh", "--",
                  "./mlpt-payload.sh; stat -c %a mlpt-payload.sh", prefix=from_a_removed_folder(tmp_path))
    assert done.returncode == 0, done.stderr
    assert {e["stdout"] for e in by_host(done).values()} == {"payload \u2713\n750\n"}
    for host in bed.hosts:  # each host has its own home directory: really one copy per host
        with open(os.path.join(host.home, "mlpt-payload.sh"), "rb") as copied:
            assert copied.read() == payload.read_bytes()


def test_outdir_and_no_group(healthy_testbed, tmp_path):
    done = allrun(healthy_testbed, "-H", HOSTS, "--no-group", "--outdir", str(tmp_path),
                  "--", "echo same; echo err-$(hostname) >&2")
    assert done.returncode == 0, done.stderr
    for i in range(4):
        assert f"worker{i} (1)" in done.stdout
        assert (tmp_path / f"worker{i}.stdout").read_text() == "same\n"
        assert (tmp_path / f"worker{i}.stderr").read_text() == f"err-worker{i}\n"


def test_fanout_bounds_how_many_hosts_run_at_once(healthy_testbed):
    done = allrun(healthy_testbed, "--json", "-H", HOSTS, "-f", "2", "--", "sleep 0.7; date +%s.%N")
    assert done.returncode == 0, done.stderr
    ends = sorted(float(e["stdout"]) for e in by_host(done).values())
    assert ends[2] - ends[0] > 0.5   # the second pair started after the first finished


def test_second_call_reuses_connections(healthy_testbed):
    bed = healthy_testbed
    allrun(bed, "-H", HOSTS, "--", "true")
    sockets = os.listdir(bed.control_dir)
    assert len(sockets) >= 4
    done = allrun(bed, "--json", "-H", HOSTS, "--", "hostname")
    assert done.returncode == 0
    assert sorted(os.listdir(bed.control_dir)) == sorted(sockets)


def test_run_on_hosts_api_streams_lines_live(healthy_testbed, tmp_path):
    """A host's command goes on once its "first" reached on_output (a file in a shared folder)."""
    import asyncio

    from mlp_magic.ssh.runner import run_on_hosts

    bed, seen = healthy_testbed, []

    def on_output(host, stream, line):
        seen.append((host, stream, line))
        if line == "first":
            (tmp_path / host).touch()
    heard = f"{tmp_path}/$(hostname)"   # "late": the line came only after the command ended
    command = (f"echo first; for i in $(seq 300); do [ -e {heard} ] && break; sleep 0.05; done; "
               f"if [ -e {heard} ]; then echo second >&2; else echo late >&2; fi")
    results = asyncio.run(run_on_hosts(bed.host_names(), command,
                                       ssh=bed.ssh_command(), on_output=on_output, control=bed.control_dir))
    assert [r.host for r in results] == bed.host_names()
    assert {(r.status, r.stdout, r.stderr) for r in results} == {("ok", "first\n", "second\n")}, results
    firsts = [host for host, _, line in seen if line == "first"]
    seconds = [host for host, stream, line in seen if line == "second" and stream == "stderr"]
    assert sorted(firsts) == sorted(seconds) == bed.host_names()


def test_names_the_ssh_config_knows_do_not_wait_for_a_silent_host(healthy_testbed, tmp_path, monkeypatch):
    """Commands wait until every host name is known good. The bed's names map to addresses in its
    ssh config, so they are cleared at once: the hosts that answer run while worker3 (no answer)
    is still connecting, not after its connect timeout."""
    import asyncio

    from mlp_magic.ssh import names, runner as ssh_transport

    monkeypatch.setattr(names, "VERIFY_AFTER", 30.0)   # leave the fallback look-up out
    bed, connect_timeout = healthy_testbed, int(hang_bound(1.0)) + 5   # the others run in about a second
    with bed.host_blackholed(3):
        started = time.time()
        results = asyncio.run(ssh_transport.run_on_hosts(
            bed.host_names(), "date +%s.%N", ssh=bed.ssh_command(), check_names=True,
            connect_timeout=connect_timeout, control=str(tmp_path)))
    assert [r.status for r in results] == ["ok", "ok", "ok", "unreachable"]
    ran_after = [float(r.stdout) - started for r in results[:3]]
    assert max(ran_after) < hang_bound(1.0), ran_after   # not after the connect timeout


def test_a_host_given_up_before_its_marker_arrived_runs_nothing(healthy_testbed, tmp_path):
    """allrun gives up on a host (here an interrupt) while the remote wrapper has started but
    its marker, which names the command's process group, is still on its way: the command must
    not start then, nor later, and nothing of the run may stay on the host."""
    import asyncio
    import threading

    from mlp_magic.ssh import runner as ssh_transport

    bed, delay = healthy_testbed, 3.0
    slow_ssh = tmp_path / "slow-stderr-ssh"   # ssh whose stderr lines each arrive `delay` s late
    slow_ssh.write_text("#!/bin/bash\nexec 3>&2\n"
                        f"{' '.join(bed.ssh_command())} \"$@\" 2> >(while IFS= read -r line; do "
                        f"sleep {delay}; printf '%s\\n' \"$line\" >&3; done)\n")
    slow_ssh.chmod(0o755)
    ran = tmp_path / "ran"
    runner = ssh_transport.HostRunner(["worker1"], f"touch {ran}; sleep 37",
                                      ssh_transport.RunOptions(ssh=[str(slow_ssh)], control=str(tmp_path)))
    results = []
    worker = threading.Thread(target=lambda: results.extend(asyncio.run(runner.run())))
    worker.start()

    def wrappers() -> list:
        return [line for _, line in bed.processes_on(1) if "mlp_allrun" in line]

    def session_started() -> bool:   # the wrapper waits, or (were it told "go") the command ran
        return bool(wrappers() or leftover(bed, "sleep 37") or ran.exists())
    try:
        deadline = time.monotonic() + 20
        while not session_started() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert session_started(), "the remote session never started"
    finally:
        runner.request_interrupt()   # its marker is still `delay` s away
        worker.join(30)
    assert [r.status for r in results] == ["interrupted"]
    deadline = time.monotonic() + 10
    while (wrappers() or leftover(bed, "sleep 37")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert wrappers() == [] and leftover(bed, "sleep 37") == []
    time.sleep(delay)   # had it been told "go" late, it would have run by now
    assert not ran.exists()


def make_wheel(folder, name: str = "mlpt_tiny", version: str = "1.0") -> str:
    """A minimal pure-Python wheel, built by hand (no build backend, no network)."""
    import base64
    import hashlib
    import zipfile

    files = {
        f"{name}/__init__.py": "import os\nHOME = os.path.expanduser('~')\n",
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{name}-{version}.dist-info/WHEEL":
            "Wheel-Version: 1.0\nGenerator: mlpt\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = f"{name}-{version}.dist-info/RECORD"
    lines = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append(f"{path},sha256={digest},{len(text.encode())}")
    files[record] = "\n".join(lines + [f"{record},,"]) + "\n"
    wheel = os.path.join(str(folder), f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def test_pip_install_of_a_copied_wheel_lands_on_every_host(healthy_testbed, tmp_path):
    """--copy puts the wheel in each host's own home, pip installs it there (into a target
    folder of that home), and importing it on each host shows that host's copy."""
    bed = healthy_testbed
    wheel = make_wheel(tmp_path)
    python = sys.executable
    install = (f"{python} -m pip install -q --no-deps --no-index --disable-pip-version-check "
               f"--target $HOME/mlpt-site $HOME/{os.path.basename(wheel)}")
    done = allrun(bed, "-H", HOSTS, "--copy", wheel, os.path.basename(wheel), "--", install, timeout=300,
                  prefix=from_a_removed_folder(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    check = f"PYTHONPATH=$HOME/mlpt-site {python} -c 'import mlpt_tiny, os; print(mlpt_tiny.__file__)'"
    results = by_host(allrun(bed, "--json", "-H", HOSTS, "--", check))
    for host in bed.hosts:
        entry = results[host.name]
        assert entry["status"] == "ok", entry
        assert entry["stdout"].strip() == os.path.join(host.home, "mlpt-site", "mlpt_tiny", "__init__.py")


def test_allrun_magic_entry_point_on_the_hosts(healthy_testbed):
    """What %allrun / %%allrun call: options and a script cell, results stored with -o."""
    from mlp_magic.errors import HostFailure
    from mlp_magic.allrun.magic import allrun_in_notebook
    from mlp_magic.commands.pure.parse import allrun_in_line

    bed = healthy_testbed
    namespace: dict = {"hosts": HOSTS}
    script = 'echo "$(hostname) here"\n[ "$(hostname)" != worker3 ] || exit 7\n'
    with pytest.raises(HostFailure, match="failed on worker3"):
        env = allrun_env(bed)
        options = allrun_in_line("-H $hosts --connect-timeout 5 -o out", script, env, namespace)
        allrun_in_notebook(options, namespace, env=env)
    outcome = namespace["out"]
    assert [r.host for r in outcome] == [f"worker{i}" for i in range(4)]
    assert outcome["worker3"].exit_code == 7
    assert outcome.stdout["worker1"] == "worker1 here\n"
    assert outcome.exit_status == 7 and "worker3 (1) [exit 7]" in outcome.text
