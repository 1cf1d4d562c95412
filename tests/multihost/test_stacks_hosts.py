"""``mlp-magic stacks`` across namespace hosts: a real job started by mpiexec outside any notebook,
8 ranks on 4 hosts (2 each); rank 5 sleeps while the others wait in a barrier. Every host is asked
at once over ssh, the stacks come back merged, the sleeper named, the job killed at the end."""
import json
import os
import shutil
import sys
import time

import pytest

from tests.integration.stack_jobs import MPI_JOB, Job, section, stacks, write_job

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def bed_env(healthy_testbed):
    return dict(MLP_MAGIC_SSH=" ".join(healthy_testbed.ssh_command()), **healthy_testbed.env())


@pytest.fixture
def job_on_four_hosts(healthy_testbed, tmp_path):
    bed = healthy_testbed
    folder = str(tmp_path)
    script = write_job(folder, MPI_JOB)
    hostfile = bed.write_hostfile(os.path.join(folder, "hostfile"), slots=2)
    mpiexec = shutil.which("mpiexec") or os.path.join(os.path.dirname(sys.executable), "mpiexec")
    argv = [mpiexec, "-n", "8", "--hostfile", hostfile, "--map-by", "slot", "--allow-run-as-root",
            "--prtemca", "plm_ssh_agent", " ".join(bed.ssh_command()), "-x", "PATH", "-x", "PYTHONPATH",
            "--mca", "btl", "self,tcp", sys.executable, script, folder, "5", "no-child"]
    job = Job(argv, folder, count=8, wait=180)
    yield job, bed
    job.stop()
    # nothing of the job is left on any host (the sshds and sessions are the bed's); prted kills the
    # remote ranks after mpiexec returns, so a rank may still be exiting (an empty command line
    # once its memory is gone): wait for that, a few seconds at most
    deadline = time.monotonic() + 10
    while (left := job_leftovers(bed)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == []


def job_leftovers(bed):
    return [(host.name, line) for host in bed.hosts
            for _, line in bed.processes_on(host.index) if "sshd" not in line]


def test_stacks_of_a_job_on_four_hosts(job_on_four_hosts, bed_env):
    job, bed = job_on_four_hosts
    started = time.monotonic()
    done = stacks("-H", "worker[0-3]", env=bed_env)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert took < 30, took
    assert done.stdout.startswith("Python stacks of 8 processes on worker[0-3]")
    ranks = section(done.stdout, f"job {job.job}:")
    assert ranks.startswith(f"job {job.job}: 8 ranks of 8 on worker[0-3]")
    assert ("summary: ranks 0-4,6-7 (7) on worker[0-3]: job.py:37 main > job.py:25 wait_in_barrier; "
            "rank 5 on worker2: job.py:36 main > job.py:20 sleeper") in ranks
    assert "|-- ranks 0-4,6-7 (7) on worker[0-3]" in ranks and "`-- rank 5 on worker2  [odd]" in ranks
    # each rank where it runs, and by its own variable
    answer = json.loads(stacks("-H", "worker[0-3]", "--json", env=bed_env).stdout)
    placed = {p["rank"]: (h["host"], p["pid"]) for h in answer["hosts"] for p in h["processes"]}
    assert placed == {rank: (info["host"], info["pid"]) for rank, info in job.ranks.items()}


def test_an_unreachable_host_and_a_host_without_ranks_are_named(healthy_testbed, bed_env):
    with healthy_testbed.host_down(1):
        started = time.monotonic()
        done = stacks("-H", "worker[0-1]", "--timeout", "8", env=bed_env)
        took = time.monotonic() - started
    assert done.returncode == 1 and took < 20, (took, done.stderr)
    assert "no matching process on worker0" in done.stdout
    assert "  worker1: unreachable: ssh: connect to host 10.77.0.12 port 22: Connection refused" \
        in done.stdout
