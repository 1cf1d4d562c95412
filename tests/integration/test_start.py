"""Starting a World (issue 12): a rank that never registers is named, with its host and what to
try; Ctrl-C at any point of a start leaves nothing; a -np beyond this machine's memory is
refused before anything starts. Real mpiexec, real engines."""
from __future__ import annotations

import os
import time

import pytest

from mlp_magic.world.pure.budget import StartBudget
from mlp_magic.core.topology import topology_from_environment
from mlp_magic.errors import MlpMagicError
from tests import worlds
from mlp_magic.world import world as world_module
from mlp_magic.world.world import World, WorldSpec

from tests.integration.conftest import child_pids, run

pytestmark = pytest.mark.timeout(240)


def _local_spec(np: int) -> WorldSpec:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLP_", "SLURM_"))}
    return WorldSpec(topology_from_environment(env), np, oversubscribe=True)


def test_a_rank_that_never_registers_is_named_with_its_host_and_lines(no_world, tmp_path, monkeypatch):
    # Rank 1's Python stops before its engine starts (a hung import, a stuck file system...).
    (tmp_path / "sitecustomize.py").write_text(
        "import os, sys, time\n"
        "if os.environ.get('OMPI_COMM_WORLD_RANK') == '1':\n"
        "    print('rank 1 is stuck on purpose', file=sys.stderr, flush=True)\n"
        "    time.sleep(600)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(world_module, "start_budget", lambda counts: StartBudget(stall_s=8, total_s=60))
    started = time.monotonic()
    with pytest.raises(MlpMagicError) as failed:
        World(_local_spec(2)).start()
    assert time.monotonic() - started < 45
    lines = str(failed.value).splitlines()
    assert lines[0] == ("the World did not start: 1 of 2 ranks registered (no new rank for 8 s); "
                        "missing: ranks 1 on localhost")
    assert lines[1] == "  rank 1 (localhost): logged nothing"
    assert "rank 1 is stuck on purpose" in str(failed.value)   # the launcher's tail
    assert lines[-2].startswith("  try: `%mpirun --restart` to try again; a rank that logged nothing")
    assert lines[-1].startswith("  try: every log is kept in ")


@pytest.mark.parametrize("when", [0, 3, 8])
def test_ctrl_c_at_any_point_of_a_start_leaves_nothing(no_world, when):
    """``when``: registered engines at the interrupt (8 = all registered: the bootstrap is next)."""
    def progress(line, registered, np):
        if registered >= when:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        World(_local_spec(8), progress=progress).start()


def test_ctrl_c_during_the_bootstrap_leaves_nothing(no_world, monkeypatch):
    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(World, "_bootstrap", interrupted)
    with pytest.raises(KeyboardInterrupt):
        World(_local_spec(4)).start()


def test_a_np_beyond_this_machines_memory_is_refused_before_anything_starts(no_world, ip, capsys):
    import psutil

    too_many = psutil.virtual_memory().total // (60 * 2**20) + 1
    error = run(ip, f"%%mpirun -np {too_many} --oversubscribe\nprint('never')")
    assert isinstance(error, MlpMagicError)
    assert str(error).startswith(f"-np {too_many}: {too_many} ranks on this machine need about")
    assert "ranks fit here" in str(error)
    assert worlds.current_world() is None and child_pids() - no_world == set()
