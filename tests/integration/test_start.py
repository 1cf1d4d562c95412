"""Starting a World (issue 12): a rank that never registers is named, with its host and what to
try; Ctrl-C at any point of a start leaves nothing; a -np beyond this machine's memory is
refused before anything starts. Real mpiexec, real engines; each World starts in the session's
kernel (``ip.call``), inside its running loop as a user's does, its patches made there."""
from __future__ import annotations

import functools
import os
import signal
import time

import pytest

from mlp_magic.world.pure.budget import StartBudget
from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.errors import MlpMagicError
from tests import worlds
from mlp_magic.world import world as world_module
from mlp_magic.world.world import World, WorldSpec

from tests.integration.conftest import child_pids, run

pytestmark = pytest.mark.timeout(240)


def _local_spec(np: int) -> WorldSpec:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLP_", "SLURM_"))}
    return WorldSpec(topology_from_environment(env), np, oversubscribe=True)


def _start(np: int, progress=None) -> None:
    """In the kernel: start a World of ``np`` local ranks (stopped again should it start)."""
    World(_local_spec(np), progress=progress).start().stop()


def _short_budget(counts) -> StartBudget:
    return StartBudget(stall_s=8, total_s=60)


def _start_with_a_short_budget(np: int) -> None:
    """In the kernel: ``_start`` with an 8 s stall limit (world.start_budget patched there)."""
    kept = world_module.start_budget
    world_module.start_budget = _short_budget
    try:
        _start(np)
    finally:
        world_module.start_budget = kept


def _stop_button() -> None:
    """In the kernel: what a frontend's stop button does (jupyter_client: SIGINT to the kernel's
    process group); the KeyboardInterrupt comes at the kernel's next Python line."""
    os.killpg(os.getpgrp(), signal.SIGINT)
    time.sleep(30)


def _interrupted(self):
    _stop_button()


def _start_interrupted_in_the_bootstrap(np: int) -> None:
    """In the kernel: ``_start`` with a Ctrl-C in World._bootstrap (patched there)."""
    kept = World._bootstrap
    World._bootstrap = _interrupted
    try:
        _start(np)
    finally:
        World._bootstrap = kept


def _interrupt_at(when: int, line, registered, np):
    if registered >= when:
        _stop_button()


def test_a_rank_that_never_registers_is_named_with_its_host_and_lines(no_world, ip, tmp_path, monkeypatch):
    # Rank 1's Python stops before its engine starts (a hung import, a stuck file system...).
    (tmp_path / "sitecustomize.py").write_text(
        "import os, sys, time\n"
        "if os.environ.get('OMPI_COMM_WORLD_RANK') == '1':\n"
        "    print('rank 1 is stuck on purpose', file=sys.stderr, flush=True)\n"
        "    time.sleep(600)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    started = time.monotonic()
    with pytest.raises(MlpMagicError) as failed:
        ip.call(_start_with_a_short_budget, 2, timeout=120)
    assert time.monotonic() - started < 45
    lines = str(failed.value).splitlines()
    assert lines[0] == ("the World did not start: 1 of 2 ranks registered (no new rank for 8 s); "
                        "missing: ranks 1 on localhost")
    assert lines[1] == "  rank 1 (localhost): logged nothing"
    assert "rank 1 is stuck on purpose" in str(failed.value)   # the launcher's tail
    assert lines[-2].startswith("  try: `%mpirun --restart` to try again; a rank that logged nothing")
    assert lines[-1].startswith("  try: every log is kept in ")


@pytest.mark.parametrize("when", [0, 3, 8])
def test_ctrl_c_at_any_point_of_a_start_leaves_nothing(no_world, ip, when):
    """``when``: registered engines at the interrupt (8 = all registered: the bootstrap is next)."""
    with pytest.raises(KeyboardInterrupt):
        ip.call(_start, 8, functools.partial(_interrupt_at, when), timeout=120)


def test_ctrl_c_during_the_bootstrap_leaves_nothing(no_world, ip):
    with pytest.raises(KeyboardInterrupt):
        ip.call(_start_interrupted_in_the_bootstrap, 4, timeout=120)


def test_a_np_beyond_this_machines_memory_is_refused_before_anything_starts(no_world, ip, capsys):
    import psutil

    too_many = psutil.virtual_memory().total // (60 * 2**20) + 1
    error = run(ip, f"%%mpirun -np {too_many} --oversubscribe\nprint('never')")
    assert isinstance(error, MlpMagicError)
    assert str(error).startswith(f"-np {too_many}: {too_many} ranks on this machine need about")
    assert "ranks fit here" in str(error)
    assert worlds.current_world() is None and child_pids() - no_world == set()
