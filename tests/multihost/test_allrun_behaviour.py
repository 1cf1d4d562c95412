"""One ``%allrun`` behaviour whatever reaches the host (core/host_command): the same command gives
the same output run locally (sh on this machine), over ssh (the namespace hosts) and through a
live World's engines: bash, the notebook's folder, the notebook's PATH with the ranks' Python's
folder first, the host's place in the host list, and no rank's variables."""
import os
import sys

import pytest

from tests import worlds

pytestmark = pytest.mark.timeout(300)

COMMAND = ('echo "$0"; pwd; echo "$ALLRUN_HOST $ALLRUN_HOST_INDEX/$ALLRUN_HOST_COUNT"; echo "PATH=$PATH"; '
           'echo "rank: ${RANK-none} ${LOCAL_RANK-none} ${OMPI_COMM_WORLD_RANK-none} ${PMIX_RANK-none}"')
TRANSPORTS = {"local": ["localhost"], "ssh": ["worker0", "worker1"], "engines": ["worker0", "worker1"]}


@pytest.fixture
def notebook(ip, bed, tmp_path, monkeypatch):
    """The shell, with no World, the bed's ssh, and a notebook folder of its own."""
    monkeypatch.setenv("MLP_MAGIC_SSH", " ".join(bed.ssh_command()))
    ip.run_line_magic("mpirun", "--stop")
    folder = tmp_path / "notebook folder"
    folder.mkdir()
    monkeypatch.chdir(folder)
    yield ip, str(folder)
    ip.run_line_magic("mpirun", "--stop")


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_the_same_command_gives_the_same_output_over_every_transport(notebook, transport, monkeypatch):
    ip, folder = notebook
    hosts = TRANSPORTS[transport]
    if transport == "engines":
        assert ip.run_cell(f"%%mpirun -H {','.join(h + ':2' for h in hosts)} -np 4\npass").success
        world = worlds.current_world()
        assert sorted({row.host for row in world.layout}) == hosts
        monkeypatch.setenv("MLP_MAGIC_SSH", "/nonexistent/ssh")   # only the engines can answer
    # The notebook's PATH as it is now (after the World started), not as the hosts have it.
    path = f"/mlpt-allrun-bin:{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    ranks_python = ip.eval("__import__('sys').executable")
    assert ranks_python == sys.executable   # the kernel's, as the engines run it
    result = ip.run_cell(f"%allrun -H {','.join(hosts)} -o out {COMMAND}")
    assert result.error_in_exec is None, result.error_in_exec
    out = ip.user_ns["out"]
    assert [r.host for r in out] == hosts
    for index, (host, got) in enumerate(zip(hosts, out)):
        assert (got.status, got.stderr) == ("ok", "")
        assert got.stdout == (f"bash\n{folder}\n{host} {index}/{len(hosts)}\n"
                              f"PATH={os.path.dirname(ranks_python)}:{path}\n"
                              "rank: none none none none\n")
