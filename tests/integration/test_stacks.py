"""``mlp-magic stacks`` on this machine, against real jobs started outside the notebook: an mpi4py
job under mpiexec (with a DataLoader-like child on rank 0) and a torchrun gloo job. Real py-spy,
real /proc; the faults (ptrace refused, py-spy missing) are made for real too."""
import json
import os
import shutil
import sys

import pytest

from tests.integration.stack_jobs import MPI_JOB, TORCH_JOB, Job, section, stacks, write_job

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def mpi_job(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mpi-job"))
    script = write_job(folder, MPI_JOB)
    mpiexec = shutil.which("mpiexec") or os.path.join(os.path.dirname(sys.executable), "mpiexec")
    job = Job([mpiexec, "-n", "4", "--oversubscribe", "--mca", "btl", "self,tcp", sys.executable,
               script, folder, "1", "child"], folder, count=4)
    yield job
    job.stop()


def test_the_sleeping_rank_is_named_and_the_others_grouped(mpi_job):
    done = stacks()
    assert done.returncode in (0, 1), done.stderr   # 1: another job's trouble on this shared machine
    ranks = section(done.stdout, f"job {mpi_job.job}:")
    assert ranks.startswith(f"job {mpi_job.job}: 4 ranks of 4 on localhost")
    assert ("summary: ranks 0,2-3 (3) on localhost: job.py:37 main > job.py:25 wait_in_barrier; "
            "rank 1 on localhost: job.py:36 main > job.py:20 sleeper") in ranks
    assert "`-- rank 1 on localhost  [odd]" in ranks and "--> job.py:20 sleeper" in ranks
    kids = section(done.stdout, f"children of the ranks of {mpi_job.job}")
    assert "summary: 1 child process of rank 0 on localhost: <string>:4 <module>" in kids


def test_ranks_come_from_each_process_own_variable(mpi_job):
    done = stacks("--json")
    [here] = json.loads(done.stdout)["hosts"]
    found = {p["pid"]: p["rank"] for p in here["processes"] if p["job"] == mpi_job.job and not p["child_of"]}
    assert found == {info["pid"]: rank for rank, info in mpi_job.ranks.items()}
    [child] = [p for p in here["processes"] if p["child_of"] and p["job"] == mpi_job.job]
    assert child["pid"] == mpi_job.ranks[0]["child"] and child["child_of"] == mpi_job.ranks[0]["pid"]


def test_two_names_of_this_machine_are_one_scan(mpi_job):
    import socket

    done = stacks("--json", "-H", f"localhost,{socket.gethostname()}")
    hosts = json.loads(done.stdout)["hosts"]
    assert [h["host"] for h in hosts] == ["localhost"]   # once, not each process twice
    ranks = [p["rank"] for p in hosts[0]["processes"] if p["job"] == mpi_job.job and not p["child_of"]]
    assert sorted(ranks) == [0, 1, 2, 3]


def test_pid_means_this_machine_even_in_a_platform_job(mpi_job):
    pid = mpi_job.ranks[1]["pid"]
    # MLP_* variables name other hosts: a bare --pid still asks only this machine
    platform = {"MLP_WORKER_NUM": "2", "MLP_WORKER_0_HOST": "localhost",
                "MLP_WORKER_1_HOST": "unreachable-worker-1.invalid"}
    done = stacks("--json", "--pid", str(pid), env=platform)
    hosts = json.loads(done.stdout)["hosts"]
    assert [h["host"] for h in hosts] == ["localhost"] and done.returncode == 0, done.stdout
    assert [p["pid"] for p in hosts[0]["processes"]] == [pid]


def test_pid_and_match_choose_other_processes(mpi_job):
    one = mpi_job.ranks[2]["pid"]
    done = stacks("--pid", f"{one},999999999")
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("summary: rank 2 on localhost: job.py:40 <module> > ... > job.py:25 wait_in_barrier"
            in done.stdout), done.stdout + done.stderr
    assert done.stdout.endswith("\nnot shown:\n"
                                "  could not read pid 999999999 on localhost: gone: no such process\n")
    matched = stacks("--match", r"job\.py .* 1 child$")
    ranks = section(matched.stdout, f"job {mpi_job.job}:")
    assert "4 ranks of 4" in ranks and "rank 1 on localhost  [odd]" in ranks
    assert "children of the ranks" not in matched.stdout   # its command line does not match


def test_a_pid_without_a_python_stack_says_why(tmp_path):
    """--pid of a kernel thread, a zombie, a pid that does not exist: each said as what it is
    (before: all three were "gone: no such process")."""
    import subprocess
    import time

    zombie = subprocess.Popen(["true"])   # not waited for until the end: a zombie meanwhile
    try:
        deadline = time.monotonic() + 10
        while not open(f"/proc/{zombie.pid}/stat").read().rpartition(")")[2].split()[0] == "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        done = stacks("--pid", f"2,{zombie.pid},999999999")
    finally:
        zombie.wait()
    assert done.returncode == 1
    assert done.stdout.endswith(
        "\nnot shown:\n"
        "  could not read pid 2 on localhost: not Python: a kernel thread\n"
        f"  could not read pid {zombie.pid} on localhost: gone: it exited (a zombie: its parent has not "
        "reaped it)\n"
        "  could not read pid 999999999 on localhost: gone: no such process\n"), done.stdout


def test_native_frames_come_with_native(mpi_job):
    done = stacks("--native", "--pid", ",".join(str(mpi_job.ranks[r]["pid"]) for r in range(4)))
    ranks = section(done.stdout, f"job {mpi_job.job}:")
    assert " [libc.so" in ranks or " [libpython" in ranks, ranks   # C frames, named by their library
    assert "rank 1 on localhost  [odd]" in ranks and "--> job.py:20 sleeper" in ranks


def test_ptrace_refused_is_one_error_naming_the_fix(mpi_job):
    if os.geteuid() != 0:   # a user without CAP_SYS_PTRACE has nothing to drop
        pytest.skip("needs root: the test drops CAP_SYS_PTRACE from a root shell")
    capsh = shutil.which("capsh") or "/sbin/capsh"   # scripts/test-setup.sh installs it (libcap2-bin)
    import subprocess

    command = f"{sys.executable} -m mlp_magic.cli stacks --pid {mpi_job.ranks[0]['pid']}"
    done = subprocess.run([capsh, "--drop=cap_sys_ptrace", "--", "-c", command], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("mlp-magic: py-spy may not read the processes on localhost (ptrace refused)")
    assert "CAP_SYS_PTRACE" in line and "kernel.yama.ptrace_scope" in line


def test_py_spy_missing_is_one_error_naming_the_fix(mpi_job, tmp_path):
    """A Python environment that has mlp_magic's dependencies but no py-spy anywhere."""
    import subprocess
    import sysconfig

    base = os.path.realpath(sys.executable)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(base)
    (venv / "lib").symlink_to(os.path.dirname(os.path.dirname(sysconfig.get_paths()["purelib"])))
    (venv / "pyvenv.cfg").write_text(f"home = {os.path.dirname(base)}\n")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                           if not os.path.exists(f"{p}/py-spy"))
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "mlp_magic.cli", "stacks"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PATH=path))
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("mlp-magic: py-spy is not installed on localhost: ") and "pip install" in line


def test_the_magic_shows_the_same_report(ip, mpi_job, capsys):
    assert ip.run_cell("%mlp_stacks --pid " + str(mpi_job.ranks[1]["pid"])).success
    out = capsys.readouterr().out
    assert "summary: rank 1 on localhost: job.py:40 <module> > ... > job.py:20 sleeper" in out
    result = ip.run_cell("%mlp_stacks --pid 0")
    assert "--pid" in str(result.error_in_exec)


@pytest.fixture
def torch_job(tmp_path):
    folder = str(tmp_path)
    script = write_job(folder, TORCH_JOB)
    job = Job([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
               script, folder, "2"], folder, count=4, wait=240,
              env={"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
    yield job
    job.stop()


def test_a_torchrun_gloo_job(torch_job):
    done = stacks()
    ranks = section(done.stdout, f"job {torch_job.job}:")
    assert ranks.startswith(f"job {torch_job.job}: 4 ranks of 4 on localhost")
    summary = ranks.split("\n")[1]
    assert summary.startswith("summary: ranks 0-1,3 (3) on localhost: job.py:31 main > ... > "
                              "torch/distributed/distributed_c10d.py:"), summary
    assert summary.endswith(" barrier; rank 2 on localhost: job.py:30 main > job.py:19 sleeper"), summary
    assert "|   --> job.py:23 wait_in_barrier" in ranks and "`-- rank 2 on localhost  [odd]" in ranks
