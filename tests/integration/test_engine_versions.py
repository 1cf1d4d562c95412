"""An engine Python mlp_magic cannot use is refused at once, in one line naming the host and the
version found (issue 24): here the engines' Python finds ipyparallel 8.8.0 first on its path
(its metadata; the World's kernel keeps its own), as a training image with an old ipyparallel
would. Real mpiexec, real engines; the World starts in the session's kernel (``ip.call``)."""
from __future__ import annotations

import os
import time

import pytest

from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.errors import MlpMagicError
from mlp_magic.world.world import World, WorldSpec

from tests.integration.conftest import child_pids, run

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def no_world(ip):
    run(ip, "%mpirun --stop")
    before = child_pids()
    yield
    deadline = time.monotonic() + 15
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert child_pids() - before == set(), "processes left behind"


def _start_two_ranks() -> None:
    """In the kernel: start a World of 2 local ranks (stopped again should it start)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLP_", "SLURM_"))}
    World(WorldSpec(topology_from_environment(env), 2, oversubscribe=True)).start().stop()


def test_an_engine_python_with_an_old_ipyparallel_is_refused_in_one_line(no_world, ip, tmp_path,
                                                                         monkeypatch):
    old = tmp_path / "old-image" / "ipyparallel-8.8.0.dist-info"
    old.mkdir(parents=True)
    (old / "METADATA").write_text("Metadata-Version: 2.1\nName: ipyparallel\nVersion: 8.8.0\n")
    monkeypatch.setenv("PYTHONPATH", str(old.parent))
    started = time.monotonic()
    with pytest.raises(MlpMagicError) as refused:
        ip.call(_start_two_ranks, timeout=60)
    assert time.monotonic() - started < 30   # at once, not after a registration deadline
    assert str(refused.value) == ("the engines cannot start, mlp_magic needs another Python there: "
                                  "localhost: ipyparallel 8.8.0 (needs >=9.0.0,<10)")
