"""Everything a World writes is its owner's only (issue 24, "private files"): with the usual umask
022, a kernel runs a real World through a few cells (output, fd output, an error, a hang that
dumps every rank's stacks) and every folder and file it wrote under its fresh $HOME, running and
after the stop, is 0700 / 0600. The old code left 39 readable by others in the same run.

The kernel is a real ipykernel of its own (tests/kernel.py), started under umask 022 with its own
$HOME and $TMPDIR and no MLP_MAGIC_* paths (the defaults under ~/.mlp_magic). IPython's own
profile (~/.ipython, made by the kernel's IPython before any World) is IPython's, not ours: the
test checks that the World adds nothing to it.
"""
from __future__ import annotations

import os
import stat

import pytest

from tests import kernel as real

pytestmark = pytest.mark.timeout(300)

CELLS = ["%%mpirun -np 2\nprint('hello', rank)\nimport os\nos.system('echo below python')",
         "%%mpirun\n1/0",
         "%%mpirun --timeout 3\nimport time\ntime.sleep(60)",
         "%%mpirun\nx = 5"]


def _wide(base: str, skip=()) -> list:
    """In the kernel: what under ``base`` others may read, write or enter (links aside)."""
    found = []
    for root, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            rel = os.path.relpath(path, base)
            if mode & 0o077 and not stat.S_ISLNK(mode) and not rel.startswith(skip):
                found.append(f"{oct(stat.S_IMODE(mode))} {rel}")
    return sorted(found)


def _listing(folder: str) -> list:
    return sorted(os.path.relpath(os.path.join(r, n), folder) for r, d, f in os.walk(folder) for n in d + f)


def _ipython_profile() -> list:
    """In the kernel: what its ~/.ipython holds."""
    return _listing(os.path.join(os.environ["HOME"], ".ipython"))


def _after_the_cells(base: str) -> dict:
    """In the kernel: once the last cell's summary is written (in the background), what is wide
    and which cell logs there are."""
    from mlp_magic.output import logs

    logs.written()
    return {"running": _wide(base, skip=(".ipython",)),
            "logs": sorted(os.listdir(os.path.join(os.environ["HOME"], ".mlp_magic", "logs")))}


def test_a_world_under_umask_022_writes_nothing_others_can_read(tmp_path, monkeypatch):
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    for name in [k for k in os.environ if k.startswith("MLP_MAGIC_")]:
        monkeypatch.delenv(name)   # only while this kernel starts and runs: the session's keeps its own
    umask = os.umask(0o022)   # the kernel inherits it, as one started from a user's shell
    try:
        kernel = real.Kernel(env={"HOME": str(home), "TMPDIR": str(tmp)}, echo=False)
    finally:
        os.umask(umask)
    try:
        kernel.quietly("import os as _o; _o.umask(0o022); del _o")
        before = kernel.call(_ipython_profile)
        for cell in CELLS:
            kernel.run_cell(cell, timeout=120)
        seen = kernel.call(_after_the_cells, str(home), timeout=60)
        assert kernel.run_cell("%mpirun --stop", timeout=120).success
        seen.update(stopped=kernel.call(_wide, str(home), (".ipython",)),
                    ipython_added=sorted(set(kernel.call(_ipython_profile)) - set(before)))
    finally:
        kernel.shutdown()
    assert len(seen["logs"]) == 4   # the cells ran and logged
    assert seen["running"] == []
    assert seen["stopped"] == []
    assert seen["ipython_added"] == []
    stacks = [path for path in (home / ".mlp_magic" / "logs").rglob("stacks/rank*.txt")]
    assert len(stacks) == 2 and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in stacks)


def _a_local_world_listening() -> tuple:
    """In the kernel: a 2-rank World's listening addresses (its controller's tree) and its
    description; the World stopped again."""
    import psutil

    from mlp_magic.machine.topology import topology_from_environment
    from mlp_magic.world.world import World, WorldSpec

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLP_", "SLURM_"))}
    world = World(WorldSpec(topology_from_environment(env), 2, oversubscribe=True), notice=_silent)
    try:
        world.start()
        controller = psutil.Process(world.processes[0].pid)
        addresses = {c.laddr.ip for process in [controller, *controller.children(recursive=True)]
                     for c in _connections(process) if c.status == psutil.CONN_LISTEN}
        return addresses, world.describe()
    finally:
        world.stop()


def _silent(line: str) -> None:
    pass


def test_a_local_world_listens_on_loopback_only_and_says_it_runs_as_root(ip):
    addresses, described = ip.call(_a_local_world_listening, timeout=120)
    assert addresses == {"127.0.0.1"}
    assert (", as root)" in described) == (os.geteuid() == 0), described


def _connections(process) -> list:
    """A process's inet sockets (``net_connections`` from psutil 6; the floor, 5.9, has
    ``connections``)."""
    listing = getattr(process, "net_connections", None) or process.connections
    return listing("inet")
