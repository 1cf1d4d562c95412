"""Which engine probes which host, and the collect's argument checks.

The collect itself (gpu/engines) runs against a real World in tests/integration/test_cluster_collect.py.
"""
from __future__ import annotations

import pytest

from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu.probe import probe_on_engine
from mlp_magic.gpu.engines import collect_from_engines, collect_from_world, probe_targets


def test_local_rank_zero_of_each_host_probes_it():
    layout = topology_from_environment({}, hosts="worker0:4,worker1:4").layout(8)
    engines = {rank: 100 + (7 - rank) for rank in range(8)}  # engine ids are not ranks
    assert probe_targets(layout, engines) == {"worker0": (0, 107), "worker1": (4, 103)}


def test_a_host_whose_first_rank_has_no_engine_is_probed_by_its_next():
    layout = topology_from_environment({}, hosts="worker0:2,worker1:2").layout(4)
    assert probe_targets(layout, {1: 11, 2: 12, 3: 13}) == {"worker0": (1, 11), "worker1": (2, 12)}
    assert probe_targets(layout, {}) == {}


def test_hosts_keep_layout_order():
    layout = topology_from_environment({}, hosts="zeta:1,alpha:1,mid:1").layout(3)
    assert list(probe_targets(layout, {0: 0, 1: 1, 2: 2})) == ["zeta", "alpha", "mid"]


def test_the_engine_side_probe_returns_plain_data():
    data = probe_on_engine(2.0, "some-host")
    assert data["host"] == "some-host" and data["source"] in ("nvml", "nvidia-smi", "none")
    assert isinstance(data["gpus"], list) and isinstance(data["links"], dict)


def test_the_engine_side_probe_imports_only_the_probe_and_the_package_names_load_when_asked():
    """An engine's first rank runs it: nothing of the ssh collect, the hints or the nvidia-smi
    parsers (where no nvidia-smi runs) comes with it."""
    import json
    import subprocess
    import sys

    code = ("import json, sys\n"
            "from mlp_magic.gpu.probe import probe_on_engine\n"
            "probe_on_engine(2.0, 'h')\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('mlp_magic'))\n"
            "from mlp_magic.gpu import HostGpus, host_hints, parse_topo_matrix\n"
            "import mlp_magic.gpu as gpu\n"
            "print(json.dumps([loaded, HostGpus.__module__, host_hints.__module__,"
            "                  'probe_local' in dir(gpu)]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/nonexistent"})   # no nvidia-smi
    loaded, *names = json.loads(done.stdout.strip().splitlines()[-1])
    # the probing itself is a child's: nothing of NVML, the deadline thread or nvidia-smi's parsers
    # (core/rank_variables: the names host_command keeps from a command run once per host)
    assert loaded == ["mlp_magic", "mlp_magic.core", "mlp_magic.core.host_command", "mlp_magic.core.numbers",
                      "mlp_magic.core.rank_variables", "mlp_magic.errors", "mlp_magic.gpu",
                      "mlp_magic.gpu.probe", "mlp_magic.gpu.pure", "mlp_magic.gpu.pure.model",
                      "mlp_magic.location"]
    assert names == ["mlp_magic.gpu.pure.model", "mlp_magic.gpu.pure.hints", True]


@pytest.mark.parametrize("timeout", [0, -1.0, None])
def test_timeout_must_be_positive(timeout):
    with pytest.raises(MlpMagicError, match="timeout must be positive"):
        collect_from_world(None, timeout=timeout)  # checked before the World is read
    with pytest.raises(MlpMagicError, match="timeout must be positive"):
        collect_from_engines(None, {}, timeout=timeout)
