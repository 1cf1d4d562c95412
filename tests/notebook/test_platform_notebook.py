"""The project's central case as a user runs it: a notebook on worker0 of a platform job of two
workers (namespace hosts with sshd), described by the MLP_* variables alone, executed by nbclient
in a real kernel. It failed at its first ``%%mpirun`` on every kernel while every test through an
in-process shell passed (issue 43). The floors job runs it too (ipykernel 6, IPython 8)."""
import os

import pytest

from mlp_magic.demo import execute_notebook
from tests.notebook.test_examples import _outputs_text as _shown

NOTEBOOK = os.path.join(os.path.dirname(__file__), "notebooks", "platform-two-hosts.ipynb")
pytestmark = [pytest.mark.notebook, pytest.mark.multihost, pytest.mark.timeout(600)]


@pytest.fixture
def platform_job(testbed, monkeypatch):
    """The kernel nbclient starts inherits a platform job's variables, and ssh to the workers."""
    for host in testbed.hosts:
        testbed.set_link(host.index, up=True)
    job = {"MLP_WORKER_NUM": "2", "MLP_WORKER_GPU": "0", "MLP_MPI_HOSTS": "worker0:2,worker1:2",
           "MLP_MPI_NP": "4", "MLP_WORKER_0_HOST": testbed.hosts[0].address,
           "MLP_WORKER_1_HOST": testbed.hosts[1].address, "MLP_ROLE": "WORKER", "MLP_ROLE_INDEX": "0",
           "MLP_MAGIC_SSH": " ".join(testbed.ssh_command()), **testbed.env()}
    for key, value in job.items():
        monkeypatch.setenv(key, value)
    return testbed


def test_a_platform_notebook_on_two_workers_runs_in_a_real_kernel(platform_job, tmp_path):
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    execute_notebook(notebook, str(tmp_path))
    cells = [_shown(c) for c in notebook.cells if c.cell_type == "code"]
    assert cells[1] == "2 worker0:2,worker1:2 4\n"
    started = cells[2]
    assert "asyncio" not in started, started
    assert "started World of 4 ranks" in started and "worker0: ranks 0-1; worker1: ranks 2-3" in started
    assert "---------------- ranks 0-3 (4) on worker[0-1] ----------------" in started, started
    assert "worker{node_rank} rank {rank} local {local_rank} node {node_rank}" in started, started
    assert "sum over the ranks 6.0" in cells[3], cells[3]
    assert "World of 4 ranks" in cells[4], cells[4]
    died = cells[5]
    assert "rank 3" in died and "worker1" in died and "RankFailure" in died, died
    # the others live on, on both hosts (ULFM), and keep what they held
    assert "was killed by a signal" in died and "the other 3 ranks kept their state" in died, died
    assert "running, rank 3 dead" in cells[6], cells[6]
    assert "ranks 0-2 (3) on worker[0-1]" in cells[7] and "still 6.0" in cells[7], cells[7]
    assert "stopped" in cells[8] or "no World" in cells[8], cells[8]
