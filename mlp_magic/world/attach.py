"""``%mpirun --attach``: another kernel of the same user takes up a running World.

What the kernel side of a World knows after its start (the rank map, the ranks' identities, MPI,
the client's connection file, its processes) is saved in the World's own folder (0700, the file
0600, next to the connection files that hold its key) once the ranks are set up. A kernel that
attaches reads it back, connects a new client to the same controller, and takes the World over
from the keeper (world/keeper): the ranks are the same processes, with everything they held,
and the agents (live GPUs, the panel's actions) the ranks started are the same too.
"""
from __future__ import annotations

import os
import pickle

import mlp_magic
from mlp_magic.errors import MlpMagicError
from mlp_magic.world import keeper, keeping, processes

FACTS_FILE = "attach.pickle"
FACTS = ("id", "mpi", "controller_ip", "client_file", "encrypted", "identities", "rank_to_engine",
         "master", "started_at", "ranks_per_cpu", "workdir", "agents", "agent_key")


def save_facts(world) -> None:
    """The kernel side's facts, for a kernel that attaches later (only its owner can read them)."""
    from mlp_magic.engine.private_files import open_private

    facts = {name: getattr(world, name) for name in FACTS}
    facts.update(version=mlp_magic.__version__, spec=world.spec,
                 processes=[(p.name, p.pid, p.create_time, p.log_path) for p in world.processes])
    with open_private(os.path.join(world.workdir, FACTS_FILE), "wb") as handle:
        pickle.dump(facts, handle)


def read_facts(workdir: str) -> dict:
    """The facts a World's start saved; one error naming what is wrong."""
    path = os.path.join(workdir, FACTS_FILE)
    try:
        if os.stat(path).st_uid != os.getuid():
            raise MlpMagicError(f"{path} belongs to another user: not attaching to it")
        with open(path, "rb") as handle:
            facts = pickle.load(handle)
    except FileNotFoundError:
        raise MlpMagicError(f"the World in {workdir} saved no facts to attach with (it was still "
                            "starting, or it is gone)") from None
    except (OSError, pickle.UnpicklingError, AttributeError, ImportError, EOFError) as err:
        raise MlpMagicError(f"cannot read {path}: {err}") from None
    if not isinstance(facts, dict) or facts.get("version") != mlp_magic.__version__:
        raise MlpMagicError(f"the World was started by another mlp_magic version "
                            f"({facts.get('version') if isinstance(facts, dict) else '?'}, this is "
                            f"{mlp_magic.__version__}): `mlp-magic stop` it and start a new one")
    return facts


class KeptProcess:
    """A World process this kernel did not start (controller, launcher, plain engine): watched by
    pid and start time (a reused pid is another process), stopped with its tree."""

    popen = None

    def __init__(self, name: str, pid: int, create_time, log_path: str):
        self.name, self.pid, self.create_time, self.log_path = name, pid, create_time, log_path

    def running(self) -> bool:
        return keeper.alive((self.pid, self.create_time))

    def failure(self) -> str:
        tail = processes._tail(self.log_path)
        return f"{self.name} (pid {self.pid}) ended" + (f":\n{tail}" if tail else "")

    def stop(self, grace: float = 3.0) -> None:
        processes.kill_tree(self.pid, self.create_time, grace)
        processes.end_leftovers(processes.sessions_of([(self.pid, self.create_time)]))


class KeeperRef:
    """The keeper of an attached World: another kernel's child, left to leave on its own."""

    def __init__(self, pid: int):
        self.pid = pid


def adopt(world, facts: dict, keeper_pid) -> None:
    """Fill ``world`` (made from the facts' spec) with the facts, connect it and own it."""
    for name in FACTS:
        setattr(world, name, facts[name])
    world.kept, world.keep_hours = keeping.kept_now(world.workdir)
    world.processes = [KeptProcess(*entry) for entry in facts["processes"]]
    world.keeper = KeeperRef(keeper_pid) if keeper_pid else None
    gone = [p.name for p in world.processes if not p.running()]
    if gone:
        raise MlpMagicError(f"the World's {', '.join(gone)} ended: there is nothing to attach to "
                            "(`mlp-magic stop` clears what is left)")
    world.connect_client(facts["client_file"])
    missing = sorted(set(world.rank_to_engine.values()) - set(world.client.ids))
    if missing:
        ranks = [r for r, e in world.rank_to_engine.items() if e in missing]
        raise MlpMagicError(f"ranks {ranks} of the World are gone: `mlp-magic stop` it and start again")
    keeping.own(world)


def busy_ranks(world) -> list:
    """The ranks still running (or queued behind) a request of the kernel that left."""
    try:
        queues = world.client.queue_status()
    except Exception:  # noqa: BLE001 - a controller that does not answer: the next cell says so
        return []
    by_engine = {engine: rank for rank, engine in world.rank_to_engine.items()}
    return sorted(by_engine[e] for e, q in queues.items()
                  if e in by_engine and isinstance(q, dict) and q.get("queue", 0) > 0)


def attach_world(facts: dict, keeper_pid, notice):
    """The World the facts describe, connected to this kernel and owned by it."""
    from mlp_magic.world.world import World

    world = World(facts["spec"], notice=notice)
    try:
        adopt(world, facts, keeper_pid)
        world.watch_processes()
        world.live.ready()
        world.publish()
    except BaseException:
        keeping.detach(world)
        raise
    return world
