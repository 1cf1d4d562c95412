"""A World: one ipyparallel engine per MPI rank, started by the job's mpiexec, kept across cells.

Engine ids are not ranks: each engine reports the rank its launcher gave it and we map explicitly.
Before user code runs, every engine has torch's variables (core/rank_variables.TORCH) set, and
``rank``, ``world_size``, ``local_rank``, ``node_rank`` in its namespace.
"""
from __future__ import annotations

import itertools
import logging
import os
import shutil
import socket
import tempfile
import time
import weakref
from dataclasses import dataclass
from functools import partial

import psutil

from mlp_magic import config
from mlp_magic.core.hostfile import LOOPBACK
from mlp_magic.core.placement import check_placement
from mlp_magic.core.ranges import fold_ranks, rank_words
from mlp_magic.world.pure.budget import busiest_ranks_per_cpu, memory_shortfall, start_budget
from mlp_magic.core.topology import Topology
from mlp_magic.engine import bootstrap as engine_bootstrap, identity as engine_identity
from mlp_magic.engine.ipykernel_private import with_missing
from mlp_magic.engine.private_files import narrow_tree, private_dirs
from mlp_magic.machine.names import is_this_machine
from mlp_magic.errors import MlpMagicError
from mlp_magic.world import facts, guards, panel_record, published, rank_setup
from mlp_magic.world.keep import ownership
from mlp_magic.world.start import calls as start_calls
from mlp_magic.client.ipp_private import abort_jobs, has_control_request, interrupt_engines
from mlp_magic.world.start.launch import start_processes
from mlp_magic.world.deaths import controller_lost, launcher_log
from mlp_magic.world.lifeline import Lifeline, wait_for_ends
from mlp_magic.world.rank_deaths import RankDeathWatch
from mlp_magic.agent.launch import start_agents
from mlp_magic.world.live import LiveWorld
from mlp_magic.world.start.mpi import MpiInfo
from mlp_magic.world.processes import reap_orphans, stop_ranks, wait_for_file
from mlp_magic.client.connect import connect
from mlp_magic.client.quiet_replies import complete_quiet_outputs
from mlp_magic.world.start.registration import Waiting, start_advice, wait_for_engines

DISPLAY_CAP = 1_000_000  # characters per rank and stream shown in the notebook; the log has all
DISPLAY_BUDGET = 64_000_000  # ... but all ranks together stay within this (512 ranks: 125 kB each)


def display_cap(np: int) -> int:
    return max(10_000, min(DISPLAY_CAP, DISPLAY_BUDGET // max(np, 1)))


_counter = itertools.count()


@dataclass(frozen=True)
class WorldSpec:
    """What a World is: reused while the spec is unchanged, restarted when it changes."""

    topology: Topology
    np: int
    oversubscribe: bool = False


class World:
    def __init__(self, spec: WorldSpec, notice=print, progress=None):
        self.spec = spec
        self.layout = spec.topology.layout(spec.np, spec.oversubscribe)
        self.notice = notice
        self.progress = progress or (lambda line, registered, np: None)
        ranks_per_host = spec.topology.ranks_per_host(spec.np, spec.oversubscribe)
        self.busiest_host_ranks = max(ranks_per_host, default=0)  # sets the start's pace
        # sets the interrupt's pace; until the ranks say what CPUs they have: one for the busiest host
        self.ranks_per_cpu = float(self.busiest_host_ranks)
        self.budget = start_budget(ranks_per_host)
        self.processes: list = []
        self.client = None
        self.mpi: MpiInfo | None = None
        self.rank_to_engine: dict = {}
        self.started_at = None
        self.workdir = None
        self.controller_ip = LOOPBACK
        self.client_file, self.encrypted = None, False
        self.identities: dict = {}     # rank -> what its engine reported (pid, host, stacks file...)
        self.master = None             # (MASTER_ADDR, MASTER_PORT)
        self.gpus: dict = {}           # host -> HostGpus dict, for the lab panel
        self.agents: dict = {}         # host -> {addr, port, pid} | {error} (agent/launch)
        self.agent_key = None
        self._busy_job = None          # the last job sent: later cells must not queue behind it
        self.id = f"{socket.gethostname()}-{os.getpid()}-{next(_counter)}"   # the panel's name for it
        self.state_dir = config.state_dir()   # its record is written and withdrawn there, come what may
        self.as_root = os.geteuid() == 0   # said in every description: each rank may change anything
        self.live = LiveWorld([row.host for row in self.layout], self.publish)   # rank states
        self.waiters = weakref.WeakSet()   # the Requests in flight, woken when a process of ours ends
        self.lifeline: Lifeline | None = None
        self.keeper, self.kept, self.keep_hours = None, False, None   # world/keep/ownership
        self.lost_hosts: dict = {}     # host -> ranks: stopped answering during a cell (host_watch)
        self.survives_deaths = False   # ULFM: a rank's death ends that rank only (world/rank_deaths)
        self.dead_ranks: dict = {}     # rank -> how it ended; the others run on
        self.spawned: dict = {}        # (launcher job, index) -> rank: the ranks respawned since
        self.death_watch: RankDeathWatch | None = None
        self.reach = None                  # the other hosts' ssh, checked while the start runs
        self._gpus_refreshed_at = float("-inf")
        self._start_deadline = float("inf")

    @property
    def busy_job(self):
        """The last job sent whose ranks may still run a cell (None: all free); set here only."""
        return self._busy_job

    def claim(self, job) -> None:
        """``job``'s ranks are busy from now on: a later cell is refused until it is released."""
        self._busy_job = job

    def release_busy(self) -> None:
        """The busy job is over: its requests are let go, and later cells run again."""
        job, self._busy_job = self._busy_job, None
        if job is not None:
            job.release()

    def wake_when_a_process_ends(self, waiter) -> None:
        self.waiters.add(waiter)   # held weakly: a finished wait is forgotten

    def hosts_lost(self, hosts, ranks) -> None:
        """``hosts`` stopped answering during a job on ``ranks``: their ranks are given up on."""
        for host in hosts:
            self.lost_hosts[host] = [rank for rank in ranks if self.host_of(rank) == host]

    # ----------------------------------------------------------------------------- start
    def start(self) -> "World":
        reap_orphans(self.notice)
        self._refuse_beyond_memory()
        self.workdir = tempfile.mkdtemp(prefix=f"world-{self.id}-", dir=_run_dir())
        self._start_deadline = time.monotonic() + self.budget.total_s  # the whole start's
        try:
            self.publish()   # the panel shows the ranks starting
            launched = start_processes(self.spec, self.workdir, self.budget, self.notice,
                                       self.processes, wake=lambda: [w.wake() for w in list(self.waiters)])
            self.mpi, self.controller_ip, self.reach = launched.mpi, launched.controller_ip, launched.reach
            self.client_file, self.encrypted = launched.client_file, launched.encrypted
            self.survives_deaths = launched.survives_deaths
            ownership.start_keeping(self)   # from now on, this kernel's death stops the World
            self.watch_processes()
            self._connect()
            self._map_ranks_and_bootstrap()
            self.agents, self.agent_key = start_agents(self)   # live GPUs, actions without the kernel
            self.started_at = published.now_iso()
            self.refresh_gpus()
            self.live.ready()
            facts.save_facts(self)   # for a kernel that attaches later (--attach)
        except BaseException:  # Ctrl-C included: never leave a half-started World running
            self.stop()
            raise
        return self

    def _refuse_beyond_memory(self) -> None:
        here = [row for row in self.layout
                if self.spec.topology.is_local or is_this_machine(row.host)]
        shortfall = memory_shortfall(len(here), psutil.virtual_memory().available)
        if shortfall:
            raise MlpMagicError(f"-np {self.spec.np}: {shortfall}")

    def _connect(self) -> None:
        controller = self.processes[0]
        info = wait_for_file(self.client_file, controller, self.budget.stall_s)
        narrow_tree(self.workdir)   # the controller's profile: IPython's README is copied 0644
        quiet_replies = self.connect_client(info)
        waiting = Waiting([row.host for row in self.layout], self.processes, partial(launcher_log, self),
                          start_advice(self.spec, self.controller_ip), self.workdir, self.reach)
        self.wake_when_a_process_ends(waiting)
        wait_for_engines(self.client, waiting, self.budget, self.progress)
        self.reach.stop()   # every rank registered: every host is reached
        if not quiet_replies:
            guards.plain_replies(self)   # before any request that waits on its output

    def connect_client(self, info) -> bool:
        """The kernel's client of the controller (``info``: its connection file or dict); True
        when its replies can be quiet (client/quiet_replies)."""
        self.client = connect(info, self.processes[0], self.budget.total_s)
        logging.getLogger("ipyparallel").setLevel(logging.ERROR)   # (un)registrations: ours to say
        return complete_quiet_outputs(self.client)

    def watch_processes(self) -> None:
        self.lifeline = Lifeline(self.processes, self._lost_process)
        if self.survives_deaths:
            self.death_watch = RankDeathWatch(self.processes[1].log_path, self._ranks_died, self.spawned)

    def _ranks_died(self, deaths: dict) -> None:
        """From the death watch's thread: ranks died, the others live on. During the start the
        launcher is stopped (the start then fails naming the rank, as without ULFM)."""
        if self.started_at is None:
            self.processes[1].stop()
            return
        self.dead_ranks.update(deaths)
        self.live.died(sorted(deaths))
        for requests in list(self.waiters):
            requests.news()

    def _map_ranks_and_bootstrap(self) -> None:
        identify, ip = engine_identity.identify, self.controller_ip
        asked = {eid: self.client[eid].apply_async(identify, ip) for eid in self.client.ids}
        identities = self.gather_at_start(asked, "saying who they are",
                                          "identifying itself (engine/identity)")
        by_rank = {}
        for engine_id, identity in identities.items():
            rank = identity["rank"]
            if rank is None or rank in by_rank:
                raise MlpMagicError(f"engine {engine_id} reported rank {rank!r}; cannot map engines to ranks")
            by_rank[rank] = engine_id
        if sorted(by_rank) != list(range(self.spec.np)):
            raise MlpMagicError(f"engines reported ranks {sorted(by_rank)}, expected 0-{self.spec.np - 1}")
        self.rank_to_engine = by_rank
        self.identities = {rank: identities[eid] for rank, eid in by_rank.items()}
        self.ranks_per_cpu = busiest_ranks_per_cpu((i["host"], i.get("cpus") or ())
                                                   for i in identities.values())
        check_placement(self.layout, self.identities)
        self._bootstrap()

    def _bootstrap(self) -> None:
        master_addr = LOOPBACK if self.spec.topology.is_local else self.identities[0]["addr"]
        self.master = (master_addr, self._master_port())
        pending = {row.rank: self.send_bootstrap(row.rank) for row in self.layout}
        answers = self.gather_at_start(pending, "their set-up (variables, MPI_Init, hooks)",
                                       "the set-up (variables, MPI_Init, hooks)")
        guards.report_missing(self, answers)

    def send_bootstrap(self, rank: int):
        """Send ``rank``'s engine its set-up (engine/bootstrap: torch's variables, the names,
        MPI_Init, the hooks); its AsyncResult."""
        variables, names = rank_setup.rank_variables(self, self.layout[rank])
        days = config.log_keep_days()
        retention = (config.log_root(), days) if days else None
        engine = self.client[self.rank_to_engine[rank]]
        return engine.apply_async(with_missing, engine_bootstrap.bootstrap, variables, names,
                                  self.mpi is not None, display_cap(self.spec.np), retention)

    def revived(self, rank: int, engine_id: int, identity: dict) -> None:
        """A new process stands for dead ``rank`` from now on (``%mpirun --respawn``: world/respawn)."""
        self.rank_to_engine[rank] = engine_id
        self.identities[rank] = identity
        if identity.get("launcher_process"):   # how the launcher's log will name its death
            self.spawned[tuple(identity["launcher_process"])] = rank
        self.dead_ranks.pop(rank, None)
        self.live.revived([rank])

    def gather_at_start(self, pending: dict, what: str, step: str) -> dict:
        """{rank: AsyncResult} -> {rank: value} before the start's deadline, or one error line
        naming the ranks that failed or never answered (world/start/calls)."""
        return start_calls.gather(self, pending, what, self._start_deadline, step)

    def _master_port(self) -> int:
        """The job's own port when it names one and it is free on rank 0's host, else a free one."""
        wanted = self.spec.topology.master_port
        fallback = self.identities[0]["free_port"]
        if not wanted:
            return fallback
        rank0 = self.client[self.rank_to_engine[0]]
        asked = rank0.apply_async(engine_identity.port_is_free, wanted)
        if self.gather_at_start({0: asked}, "checking $MASTER_PORT", "checking $MASTER_PORT")[0]:
            return wanted
        self.notice(f"mlp_magic: MASTER_PORT {wanted} (from the environment) is already in use on "
                    f"{self.host_of(0)}; the ranks use the free port {fallback} instead")
        return fallback

    # ----------------------------------------------------------------------------- state
    @property
    def np(self) -> int:
        return self.spec.np

    def host_of(self, rank: int) -> str:
        return self.layout[rank].host

    def interrupt(self, jobs_by_engine: dict) -> bool:
        """Stop each engine's job (a msg id or an AsyncResult): aborted if queued, SIGINT through
        the control thread if running. The abort goes first: an engine ignores SIGINT between
        cells, and a cell starting in between still gets the signal. Each engine gets only its own
        job (not N squared ids); engines gone are skipped, also one the client forgets while this
        runs (its IO thread drops a dead engine at any moment: a dead rank's, after a death the
        World survived). False if some could not be signalled."""
        try:
            registered = set(self.client.ids)
        except Exception:  # the client itself is gone
            return False
        live = [engine for engine in jobs_by_engine if engine in registered]
        aborted = abort_jobs(self.client, {engine: jobs_by_engine[engine] for engine in live})
        if aborted and not has_control_request(self.client):
            return guards.interrupt_by_signal(self, aborted) and len(aborted) == len(jobs_by_engine)
        return len(interrupt_engines(self.client, aborted)) == len(jobs_by_engine)

    def processes_alive(self) -> bool:
        return bool(self.processes) and all(p.running() for p in self.processes)

    def alive(self) -> bool:
        return self.client is not None and self.processes_alive()

    def lifeline_ended(self) -> bool:
        """One of the World's own processes (controller, launcher) has ended."""
        return self.lifeline is not None and self.lifeline.ended is not None

    def _lost_process(self, process) -> None:
        """From the lifeline's thread: every rank is gone with it (the ranks of a dead controller
        are stopped: nothing can reach them); wake whoever waits on them."""
        if process is self.processes[0]:
            controller_lost(self)
        self.live.all_died()
        for requests in list(self.waiters):
            requests.wake()

    def state(self) -> dict:
        """The World's record for the panel (world/panel_record)."""
        return panel_record.world_record(self)

    def refresh_gpus(self, timeout: float = 3.0, at_most_every: float = 0.0) -> None:
        """Each host's GPUs through its engines, for the lab panel (remote hosts included).
        Call only while the engines are idle; a host that does not answer keeps no entry."""
        from mlp_magic.gpu.engines import collect_from_world

        now = time.monotonic()
        if now - self._gpus_refreshed_at < at_most_every:
            return
        self._gpus_refreshed_at = now
        try:
            found = collect_from_world(self, timeout=timeout)
        except Exception:  # the panel is a nicety: never fail a World over it
            return
        self.gpus = {host: inventory.to_dict() for host, inventory in found.items() if not inventory.error}
        self.live.touch()

    def publish(self) -> None:
        try:
            published.publish(self.state(), self.state_dir)
        except OSError:
            pass  # the panel is a nicety; never fail a cell over it

    def describe(self) -> str:
        hosts = {}
        for row in self.layout:
            hosts.setdefault(row.host, []).append(row.rank)
        where = "; ".join(f"{h}: ranks {fold_ranks(r)}" for h, r in hosts.items())
        mpi = f"{self.mpi.flavour} {self.mpi.version}" if self.mpi else "no MPI"
        state = "running" if self.alive() else "stopped"
        state += f", {rank_words(sorted(self.dead_ranks))} dead" if self.dead_ranks and self.alive() else ""
        root = ", as root" if self.as_root else ""
        root += "" if self.spec.topology.is_local else (   # across hosts: can the network read it?
            ", encrypted" if self.encrypted else ", traffic readable on the network: MLP_MAGIC_ENCRYPT=0")
        return (f"World of {self.np} ranks ({mpi}, {self.spec.topology.source}{root}), {state}: {where}"
                + ownership.describe(self))

    # ----------------------------------------------------------------------------- stop
    def stop(self) -> None:
        """Ask the engines to exit (they release GPU contexts cleanly), give mpiexec a moment
        to end on its own, then stop whatever is left, and remove this World's files."""
        client, self.client = self.client, None
        clean = client is not None and self.started_at is not None
        ownership.begin_stop(self)   # the keeper stays: it ends the stop if this kernel dies midway
        if self.reach is not None:
            self.reach.stop()
        if self.lifeline is not None:
            self.lifeline.close()
        if self.death_watch is not None:
            self.death_watch.close()   # the stop's own ends are no deaths
        self.live.close()
        if client is not None:
            try:
                if clean:
                    client.shutdown(targets="all", hub=False, block=False)
                    wait_for_ends(self.processes[1:], 2.0 + self.spec.np / 64)   # on their pidfds
                client.close(linger=0)
            except Exception:  # a half-dead client must not stop the teardown
                pass
        for process in reversed(self.processes):
            process.stop()
        self.processes = []
        # The ranks here that outlived their launcher (killed, the OOM killer's pick: in sessions
        # of their own), and what they left in their groups (os.fork); by pid and start time.
        stop_ranks([i for i in self.identities.values() if i.get("host") == socket.gethostname()])
        published.withdraw(directory=self.state_dir)
        self._remove_files(keep_logs=not clean)
        ownership.end_keeping(self)   # everything has ended, on purpose: the keeper leaves

    def _remove_files(self, keep_logs: bool) -> None:
        """The workdir holds the HMAC-keyed connection files; a failed start keeps its logs
        (the error message points at them)."""
        for identity in self.identities.values():
            if identity.get("host") == socket.gethostname():
                try:
                    os.unlink(identity["stacks_path"])
                except (OSError, KeyError):
                    pass
        if self.workdir and not keep_logs:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _run_dir() -> str:
    """The folder of the Worlds' own folders (0700, as each of them: mkdtemp's)."""
    return private_dirs(os.path.join(config.home(), "run"))
