"""The server's one live model of the cluster, as the panel's routes and websocket serve it.

``panel_model`` builds the aggregator (cluster/live.LiveCluster) with what a panel can afford
to ask every few seconds: reachability, this machine's GPU inventory, the published Worlds (no
ssh: other hosts' GPUs come from the Worlds' agents).
"""
from __future__ import annotations

from collections.abc import Mapping

from mlp_magic import config
from mlp_magic.cluster.collect import CollectOptions
from mlp_magic.cluster.live import LiveCluster
from mlp_magic.cluster.reachability import DEFAULT_TIMEOUT
from mlp_magic.world.published import read_worlds

DEFAULT_CACHE_SECONDS = 4.0
DEFAULT_GPU_PROBE_TIMEOUT = 5.0


def panel_model(hostfile: str | None = None, probe_timeout: float = DEFAULT_TIMEOUT,
                gpu_probe_timeout: float = DEFAULT_GPU_PROBE_TIMEOUT, env: Mapping | None = None,
                state_dir: str | None = None) -> LiveCluster:
    options = CollectOptions(hostfile=hostfile or None, gpus="local", timeout=gpu_probe_timeout,
                             reach_timeout=probe_timeout, env=env, state_dir=state_dir, published_gpus=True)
    return LiveCluster(options, state_dir or config.state_dir(), read_worlds)
