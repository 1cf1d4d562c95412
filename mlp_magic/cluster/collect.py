"""Collect the cluster's state: the one collector behind every face (widget, ``mlp-magic status``,
the lab panel), each asking for what it can afford.

Everything is asked at once, and each part is waited for until its own deadline
(``machine.deadline``), so one silent host or wedged driver costs a timeout, not one per host:
- the topology: this kernel's running World's, unless ``--hostfile`` / ``-H`` say otherwise;
  else the environment's;
- reachability: a TCP connect to each host's ssh port (``reachability.probe_hosts``);
- GPUs, by ``gpus``: "none"; "local": this machine only (the panel, polled every few seconds);
  "all": every host, through a live World's engines (one per host) where one covers it, over ssh
  elsewhere (each host runs ``mlp-magic topo --json``), this machine in-process; a collector made
  ``for_thread`` (the live widget's, running while cells do) never asks the engines;
- the Worlds kernels publish: their engines' states, and (``published_gpus``, the panel's
  cheap stand-in for probing other hosts) the GPUs they probed.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import datetime, timezone
from typing import Any, Union
from collections.abc import Callable, Mapping, Sequence

from mlp_magic.machine.deadline import in_background
from mlp_magic.machine.names import this_machine_names
from mlp_magic.core.records import Record, fresh
from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu import HostGpus, parse_topo_matrix
from mlp_magic.cluster.pure.model import (LOCAL, ClusterState, cluster_state, failed_state, host_key,
                                          published_inventories)

GPU_MODES = ("none", "local", "all")
InventorySource = Union[HostGpus, str, "os.PathLike[str]"]


class CollectOptions(Record):
    """What one collector asks, and how long it waits."""

    hostfile: str | None = None
    hosts: str | None = None          # -H
    gpus: str = "all"                    # "none" | "local" | "all" (see the module's docstring)
    timeout: float = 5.0                 # the GPU probes: one deadline for all hosts
    reach_timeout: float | None = 2.0  # each host's port probe; None: not probed
    ssh: Any = None                      # the ssh client of remote probes (default: config's)
    state_dir: str | None = None      # where kernels publish their Worlds (default: config's)
    env: Mapping[str, str] | None = None   # the environment the topology comes from
    published_gpus: bool = False         # show the GPUs published Worlds probed (probes still win)
    ask_engines: bool = True             # probe a World's hosts through its engines (while they are idle)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Parts(Record):
    """What ``StateCollector.gather`` found; ``error``: no topology could be read."""

    topology: Any = None
    error: str | None = None
    names: frozenset = frozenset()
    reachability: Mapping = fresh(dict)
    inventories: list[HostGpus] = fresh(list)
    layout: Any = None
    updated_at: str = ""
    health: Mapping = fresh(dict)   # host -> the last doctor run's verdict


class StateCollector:
    """Callable: one ClusterState per call. ``inventories``: GPUs known already (never probed);
    ``world``: the World to show (this kernel's, for the widget)."""

    def __init__(self, options: CollectOptions | None = None, inventories: Sequence[HostGpus] = (),
                 world: Any = None):
        self.options = options = options or CollectOptions()
        if not options.timeout or options.timeout <= 0:
            raise MlpMagicError("cluster view: timeout must be positive, got %r" % options.timeout)
        if options.gpus not in GPU_MODES:
            raise MlpMagicError("cluster view: gpus must be one of %s, got %r"
                                % (", ".join(GPU_MODES), options.gpus))
        self.inventories, self.world = list(inventories), world
        self.parts = Parts(error="not collected yet")

    def for_thread(self) -> StateCollector:
        """A collector for a thread that runs while cells do: it never asks the World's engines
        (they may be running the user's cell) and shows the GPUs the World published instead."""
        published = self.options.published_gpus or self.options.gpus == "all"
        options = self.options.replace(ask_engines=False, published_gpus=published)
        return StateCollector(options, self.inventories, self.world)

    def __call__(self) -> ClusterState:
        world = self.world
        worlds = self._worlds(world)
        self.parts = self.gather(world)
        return self.state_with(worlds)

    def gather(self, world: Any = None) -> Parts:
        """Everything but the published Worlds: the topology, reachability, the GPUs probed
        (the slow part, which the live panel takes again only now and then)."""
        now = utc_now()
        try:
            topology = self._topology(world)
        except MlpMagicError as exc:
            return Parts(error=str(exc), updated_at=now)
        names = this_machine_names()
        reachability = self._start_reachability(topology, names)
        inventories = self._gpus(world, topology, names)
        layout = world.layout if world is not None and topology is world.spec.topology else None
        return Parts(topology=topology, names=names, reachability=reachability(), inventories=inventories,
                     layout=layout, updated_at=now, health=read_health(self.options.state_dir))

    def state_with(self, worlds: Sequence[Mapping], parts: Parts | None = None) -> ClusterState:
        """The picture from gathered ``parts`` (default: the last call's) and these Worlds."""
        parts = parts or self.parts
        if parts.error is not None:
            return failed_state(parts.error, parts.updated_at, worlds)
        published = published_inventories(worlds) if self.options.published_gpus else []
        state = cluster_state(parts.topology, published + parts.inventories, worlds, parts.reachability,
                              parts.names, updated_at=parts.updated_at, layout=parts.layout)
        for host in state.hosts:
            host.health = parts.health.get(host.name)
        return state

    def _topology(self, world: Any) -> Any:
        options = self.options
        if world is not None and not (options.hostfile or options.hosts):
            return world.spec.topology
        from mlp_magic.machine.topology import topology_from_environment

        return topology_from_environment(options.env, hostfile=options.hostfile, hosts=options.hosts)

    def _worlds(self, world: Any) -> list[Mapping]:
        """Published Worlds of other kernels, and this kernel's own from the World itself."""
        from mlp_magic.world.published import read_worlds

        try:
            worlds = read_worlds(self.options.state_dir)
        except (OSError, ValueError):
            worlds = []
        if world is None:
            return worlds
        return [w for w in worlds if w.get("pid") != os.getpid()] + [world.state()]

    def _start_reachability(self, topology: Any, names: frozenset) -> Callable[[], Mapping]:
        timeout = self.options.reach_timeout
        if timeout is None:
            return dict
        from mlp_magic.cluster.reachability import probe_hosts

        pending = in_background(lambda: asyncio.run(probe_hosts(topology.hosts, timeout, names)),
                                "mlp-cluster-reachability")
        deadline = time.monotonic() + timeout + 1.0
        return lambda: pending.result(deadline, {})

    def _gpus(self, world: Any, topology: Any, names: frozenset) -> list[HostGpus]:
        """The known inventories, then whatever the mode probes (the later one wins per host)."""
        mode, timeout = self.options.gpus, self.options.timeout
        if mode == "none":
            return list(self.inventories)
        deadline = time.monotonic() + timeout + 1.0
        over_ssh = self._start_ssh_collect(world, topology, names) if mode == "all" else None
        try:
            engines = self._engine_inventories(world, topology, names) if mode == "all" else []
            known = self.inventories + engines
            tried = list(over_ssh.finish(deadline).values()) if over_ssh is not None else []
        except BaseException:   # Ctrl-C, SIGTERM: the hosts' ssh clients go too
            if over_ssh is not None:
                over_ssh.stop()
            raise
        return known + tried + self._local_probe(topology, names, known, tried, deadline)

    def _engine_inventories(self, world: Any, topology: Any, names: frozenset) -> list[HostGpus]:
        """One engine per host of the World probes its host, except hosts given or not shown."""
        if world is None or not self.options.ask_engines:
            return []
        from mlp_magic.gpu.engines import collect_from_world

        shown = {host_key(h.name, names) for h in topology.hosts}
        given = {host_key(g.host, names) for g in self.inventories}
        skip = [row.host for row in world.layout
                if host_key(row.host, names) not in shown or host_key(row.host, names) in given]
        return list(collect_from_world(world, self.options.timeout, skip=skip).values())

    def _start_ssh_collect(self, world: Any, topology: Any, names: frozenset):
        """Start probing the hosts no World engine and no given inventory covers, over ssh (this
        machine in-process), while the engines answer: an Underway, or None when there are none."""
        given = {host_key(g.host, names) for g in self.inventories}
        covered = {host_key(row.host, names) for row in world.layout} if world is not None else set()
        hosts = [h for h in topology.hosts if host_key(h.name, names) not in given | covered]
        if not hosts:
            return None
        from mlp_magic.gpu.collect import start_over_ssh

        options = self.options
        return start_over_ssh(hosts, ssh=options.ssh, timeout=options.timeout,
                              connect_timeout=options.timeout, env=options.env)

    def _local_probe(self, topology: Any, names: frozenset, known: list[HostGpus], tried: list[HostGpus],
                     deadline: float) -> list[HostGpus]:
        """This machine's GPUs, under the name the topology gives it, unless known already
        (an engine that did not answer does not count: this machine can be asked directly)
        or ``tried`` already (the ssh collect probes it in-process when no World covers it)."""
        from mlp_magic.gpu import probe_local

        answered = {host_key(g.host, names) for g in known if g.gpus or not g.error}
        answered |= {host_key(g.host, names) for g in tried}
        here = [h.name for h in topology.hosts if host_key(h.name, names) == LOCAL]
        if not here or LOCAL in answered:
            return []
        timeout = self.options.timeout
        late = HostGpus(host=here[0], source="none", error="GPU probe gave no answer within %g s" % timeout)
        return [in_background(lambda: probe_local(timeout=timeout, host=here[0]),
                              "mlp-cluster-gpu-probe").result(deadline, late)]


def read_health(state_dir: str | None) -> dict[str, Any]:
    """host -> its health in the last ``mlp-magic doctor`` report of this state folder ({} when
    there is none or it cannot be read)."""
    from mlp_magic import config
    from mlp_magic.doctor.pure.report import REPORT_NAME, health_by_host

    folder = config.state_dir() if state_dir is None else state_dir
    try:
        with open(os.path.join(folder, REPORT_NAME)) as handle:
            return health_by_host(json.load(handle))
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def load_inventories(gpus: None | Mapping[str, InventorySource] | Sequence[HostGpus]) -> list[HostGpus]:
    """HostGpus per host from HostGpus objects or saved `nvidia-smi topo -m` files.

    ``gpus``: a mapping host -> HostGpus or file path, or a sequence of HostGpus (their
    ``host`` says where they belong).
    """
    if gpus is None:
        return []
    items = list(gpus.items()) if isinstance(gpus, Mapping) else [(getattr(g, "host", None), g) for g in gpus]
    return [_inventory(host, value) for host, value in items]


def _inventory(host: str | None, value: Any) -> HostGpus:
    if isinstance(value, HostGpus):
        return HostGpus.from_dict(dict(value.to_dict(), host=host or value.host))
    if isinstance(value, (str, os.PathLike)) and host:
        path = os.fspath(value)
        from mlp_magic.machine.user_files import read_text
        from mlp_magic.gpu.pure.smi_topo import MAX_TOPO_BYTES

        text = read_text(path, f"{host}'s saved topology", MAX_TOPO_BYTES)
        return parse_topo_matrix(text, host=host, source=path)
    raise MlpMagicError("gpus: expected {host: HostGpus or saved `nvidia-smi topo -m` file} or a "
                        "list of HostGpus, got %r for %r" % (type(value).__name__, host))
