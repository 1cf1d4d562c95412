"""GPU inventories collected through a real World's engines (real mpiexec, real ipyparallel).

The World is the session kernel's: what takes the World itself (its client, its engines) runs
there, in a module-level function of this file run by ``ip.call``."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mlp_magic.cluster.text import state_text
from mlp_magic.cluster.widget import cluster_view
from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu.nvml_probe import nvml_library_loads
from mlp_magic.gpu.engines import collect_from_engines, collect_from_world, probe_targets
from tests import worlds
from mlp_magic.client import job as rank_job
from mlp_magic.client.waiting import Requests
from tests.timing import hang_bound
from tests.unit.gpu.test_probe import install_smi

pytestmark = pytest.mark.timeout(240)
CPU_ONLY = not os.path.exists("/dev/nvidiactl")
H200 = Path(__file__).resolve().parents[1] / "fixtures" / "topo" / "hgx-h200-8gpu-12nic.txt"


@pytest.fixture(scope="module")
def stopped_at_the_end(ip):
    yield
    ip.run_line_magic("mpirun", "--stop")


@pytest.fixture
def world(ip, stopped_at_the_end):
    """A live World of 2 ranks on this machine (the one before, unless a test stopped it)."""
    world = worlds.current_world()
    if world is None or not world.alive() or world.np != 2:
        result = ip.run_cell("%%mpirun -np 2\npass")
        assert result.error_in_exec is None and result.error_before_exec is None
        world = worlds.current_world()
    assert world is not None and world.np == 2
    return world


class CountedRequests(Requests):
    made: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        CountedRequests.made.append(self)


_KEPT: dict = {}   # in the kernel: the World a test holds past its stop


def _busy(world, rank: int, release: Path):
    """Keep the engine of ``rank`` busy, as a running cell would, until ``release`` exists
    (two minutes at most)."""
    code = (f"import os as _os, time as _time\n_end = _time.monotonic() + 120\n"
            f"while not _os.path.exists({str(release)!r}) and _time.monotonic() < _end:\n"
            f"    _time.sleep(0.05)\n")
    return world.client[world.rank_to_engine[rank]].execute(code, block=False)


def _one_engine_answers() -> None:
    world = worlds.current_world()
    assert probe_targets(world.layout, world.rank_to_engine) == {"localhost": (0, world.rank_to_engine[0])}
    started = time.monotonic()
    found = collect_from_world(world, timeout=10.0)
    took = time.monotonic() - started
    assert list(found) == ["localhost"], found
    gpus = found["localhost"]
    assert gpus.host == "localhost" and gpus.error is None, gpus
    if CPU_ONLY:
        assert (gpus.source, gpus.gpus, gpus.nics, gpus.links) == ("none", [], [], {}), gpus
    assert took < hang_bound(1.0), took   # about a second; the bound tells it from a hang
    assert [r["state"] for r in world.state()["ranks"]] == ["idle", "idle"], world.state()


def test_one_engine_per_host_answers_for_it(ip, world):
    ip.call(_one_engine_answers)


def _probe_through_a_child(tmp_path: Path) -> None:
    world = worlds.current_world()
    seen = tmp_path / "seen"
    path = install_smi(tmp_path, ('echo "$PPID ${OMPI_COMM_WORLD_RANK-none} ${RANK-none}" >> %s\n'
                                  'if [ "$1" = topo ]; then cat %s; else exit 4; fi\n') % (seen, H200))
    engine = world.client[world.rank_to_engine[0]]
    engine.execute("import os as _os\n_path = _os.environ['PATH']\n_os.environ['PATH'] = %r" % path,
                   block=True)
    try:
        found = collect_from_world(world, timeout=10.0)["localhost"]
    finally:
        engine.execute("_os.environ['PATH'] = _path\ndel _os, _path", block=True)
    assert found.source == "nvidia-smi" and found.links["GPU0"]["GPU7"] == "NV18", found
    parent, world_rank, rank = seen.read_text().split()[:3]
    assert int(parent) not in [identity["pid"] for identity in world.identities.values()], parent
    assert (world_rank, rank) == ("none", "none"), (world_rank, rank)


@pytest.mark.skipif(nvml_library_loads(), reason="NVML answers here before nvidia-smi")
def test_the_probing_engine_probes_through_a_child_that_is_no_rank(ip, world, tmp_path):
    """The first rank finds a stand-in nvidia-smi on its PATH (no NVML here): the inventory is the
    capture's, and the stand-in's parent is neither a rank nor has a rank's identity."""
    ip.call(_probe_through_a_child, tmp_path)


def _a_busy_engine(tmp_path: Path) -> None:
    world = worlds.current_world()
    CountedRequests.made.clear()
    release = tmp_path / "release"
    sleeping = _busy(world, 0, release)
    try:
        started = time.monotonic()
        found = collect_from_world(world, timeout=0.5)
        took = time.monotonic() - started
        engine = world.rank_to_engine[0]
        assert found["localhost"].error == "no answer within 0.5 s from engine %d (rank 0)" % engine, found
        assert found["localhost"].gpus == [] and not sleeping.ready()
        assert took < hang_bound(0.5), took
        # Two hosts asked at once: the idle engine answers, the busy one costs one timeout, not more.
        targets = {"idle-host": (1, world.rank_to_engine[1]), "busy-host": (0, world.rank_to_engine[0])}
        started = time.monotonic()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(rank_job, "Requests", CountedRequests)
            found = collect_from_engines(world, targets, timeout=1.0)
        took = time.monotonic() - started
        # one RankJob waiting on client/waiting.Requests, woken by the idle engine's answer and the deadline,
        # not by a clock (a 0.1 s poll would wake ten times)
        [requests] = CountedRequests.made
        assert requests.wakes <= 3, requests.wakes
        assert found["idle-host"].error is None and found["idle-host"].host == "idle-host", found
        assert found["busy-host"].error.startswith("no answer within 1 s from engine"), found
        assert not sleeping.ready()
        assert took < hang_bound(1.0), took
    finally:
        release.touch()
        sleeping.get(hang_bound(1.0))
    # The probes left queued behind the sleep were aborted; the engine answers the next one.
    again = collect_from_world(world, timeout=10.0)
    assert again["localhost"].error is None, again


def test_a_busy_engine_is_reported_never_waited_on(ip, world, tmp_path):
    """The engine stays busy until the end of the test: each collect returning while it still
    is proves it was not waited on (how far past its timeout a collect returns: benchmarks/
    gpu_collect.py)."""
    ip.call(_a_busy_engine, tmp_path)


def _shown_view(count: int):
    """In the kernel: the view a cell's ``%mlp_cluster`` showed (its Out), with its state."""
    from IPython import get_ipython

    return get_ipython().user_ns["Out"][count]


def _the_view_of_the_magic(count: int) -> None:
    world = worlds.current_world()
    view = _shown_view(count)
    [host] = view.state.hosts
    assert (host.name, host.ranks, host.engine_summary) == ("localhost", [0, 1], "2 engines: 2 idle"), host
    assert [e.engine_id for e in host.engines] == [world.rank_to_engine[0], world.rank_to_engine[1]]
    if CPU_ONLY:
        assert host.gpus.source == "none" and host.gpus.gpus == [] and host.gpus.error is None, host.gpus
        assert "2 engines: 2 idle  none" in state_text(view.state), state_text(view.state)
    view.close()


def _the_view_with_a_saved_topology(count: int) -> None:
    view = _shown_view(count)
    [host] = view.state.hosts
    assert host.gpus.links["GPU0"]["GPU7"] == "NV18" and host.engine_summary == "2 engines: 2 idle", host
    view.close()


def _the_view_past_a_busy_engine(tmp_path: Path) -> None:
    world = worlds.current_world()
    release = tmp_path / "release"
    sleeping = _busy(world, 0, release)
    try:
        view = cluster_view(timeout=0.5, check_reachable=False)
        [host] = view.state.hosts
        assert host.gpus is not None and host.gpus.error is None and host.ranks == [0, 1], host
        view.close()
    finally:
        release.touch()
        sleeping.get(hang_bound(1.0))


def test_the_cluster_view_shows_the_world(ip, world, tmp_path):
    shown = ip.run_line_magic("mlp_cluster", "")  # the magic: this kernel's World
    assert shown.success, shown.shown
    ip.call(_the_view_of_the_magic, shown.execution_count)
    # Arguments: a saved topology stands in for this host's probe; the engines stay the World's.
    shown = ip.run_line_magic("mlp_cluster", "--timeout 3 --topo-file localhost=%s" % H200)
    assert shown.success, shown.shown
    ip.call(_the_view_with_a_saved_topology, shown.execution_count)
    refused = "^%mlp_cluster: --refresh: expected a positive number of seconds"
    with pytest.raises(MlpMagicError, match=refused):
        raise ip.run_line_magic("mlp_cluster", "--refresh x").error_in_exec
    # An engine busy past the timeout: this machine is probed directly instead.
    ip.call(_the_view_past_a_busy_engine, tmp_path)


def _keep_the_world() -> None:
    _KEPT["world"] = worlds.current_world()


def _the_stopped_world() -> None:
    world = _KEPT.pop("world")
    found = collect_from_world(world, timeout=1.0)
    assert found["localhost"].error == "the World is stopped", found
    view = cluster_view(check_reachable=False, env={})  # no World: the embedded default, probed here
    [host] = view.state.hosts
    assert host.engines == [] and view.state.source == "local machine" and host.gpus is not None, view.state
    view.close()


def test_after_stop(ip, world):
    ip.call(_keep_the_world)
    ip.run_line_magic("mpirun", "--stop")
    assert worlds.current_world() is None
    ip.call(_the_stopped_world)
