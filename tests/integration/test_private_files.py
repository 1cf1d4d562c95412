"""Everything a World writes is its owner's only (issue 24, "private files"): with the usual umask
022, a kernel runs a real World through a few cells (output, fd output, an error, a hang that
dumps every rank's stacks) and every folder and file it wrote under its fresh $HOME, running and
after the stop, is 0700 / 0600. The old code left 39 readable by others in the same run.

The kernel runs in a process of its own (its own $HOME, $TMPDIR and umask, no MLP_MAGIC_* paths:
the defaults under ~/.mlp_magic). IPython's own profile (~/.ipython, made by the kernel's IPython
before any World) is IPython's, not ours: the test checks that the World adds nothing to it.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(300)

KERNEL = r"""
import json, os, stat, sys
base = sys.argv[1]

def wide(skip=()):
    found = []
    for root, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            rel = os.path.relpath(path, base)
            if mode & 0o077 and not stat.S_ISLNK(mode) and not rel.startswith(skip):
                found.append(f"{oct(stat.S_IMODE(mode))} {rel}")
    return sorted(found)

def listing(folder):
    return sorted(os.path.relpath(os.path.join(r, n), folder) for r, d, f in os.walk(folder) for n in d + f)

from IPython.testing.globalipapp import start_ipython
ip = start_ipython()
ip.run_line_magic("load_ext", "mlp_magic")
ipython_dir = os.path.join(os.environ["HOME"], ".ipython")
before = listing(ipython_dir)
cells = ["%%mpirun -np 2\nprint('hello', rank)\nimport os\nos.system('echo below python')",
         "%%mpirun\n1/0",
         "%%mpirun --timeout 3\nimport time\ntime.sleep(60)",
         "%%mpirun\nx = 5"]
for cell in cells:
    ip.run_cell(cell)
from mlp_magic.output import logs
logs.written()   # the last cell's summary is written in the background
running = wide(skip=(".ipython",))
logs = sorted(os.listdir(os.path.join(os.environ["HOME"], ".mlp_magic", "logs")))
ip.run_line_magic("mpirun", "--stop")
print(json.dumps({"running": running, "stopped": wide(skip=(".ipython",)), "logs": logs,
                  "ipython_added": sorted(set(listing(ipython_dir)) - set(before))}))
"""


def test_a_world_under_umask_022_writes_nothing_others_can_read(tmp_path):
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLP_MAGIC_")}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    done = subprocess.run([sys.executable, "-c", KERNEL, str(home)], env=env, capture_output=True,
                          text=True, timeout=240, preexec_fn=lambda: os.umask(0o022))
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(seen["logs"]) == 4   # the cells ran and logged
    assert seen["running"] == []
    assert seen["stopped"] == []
    assert seen["ipython_added"] == []
    stacks = [path for path in (home / ".mlp_magic" / "logs").rglob("stacks/rank*.txt")]
    assert len(stacks) == 2 and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in stacks)


def test_a_local_world_listens_on_loopback_only_and_says_it_runs_as_root():
    import psutil

    from mlp_magic.core.topology import topology_from_environment
    from mlp_magic.world.world import World, WorldSpec

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLP_", "SLURM_"))}
    world = World(WorldSpec(topology_from_environment(env), 2, oversubscribe=True), notice=lambda line: None)
    try:
        world.start()
        controller = psutil.Process(world.processes[0].pid)
        addresses = {c.laddr.ip for process in [controller, *controller.children(recursive=True)]
                     for c in _connections(process) if c.status == psutil.CONN_LISTEN}
        described = world.describe()
    finally:
        world.stop()
    assert addresses == {"127.0.0.1"}
    assert (", as root)" in described) == (os.geteuid() == 0), described


def _connections(process) -> list:
    """A process's inet sockets (``net_connections`` from psutil 6; the floor, 5.9, has
    ``connections``)."""
    listing = getattr(process, "net_connections", None) or process.connections
    return listing("inet")
