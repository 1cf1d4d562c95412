"""``%mpirun --attach``: another kernel of the same user takes up a running World.

A kernel that attaches reads back what the World's start saved (world/facts), connects a new
client to the same controller, and takes the World over from the keeper (world/keep/keeper): the
ranks are the same processes, with everything they held, and the agents (live GPUs, the panel's
actions) the ranks started are the same too.
"""
from __future__ import annotations

from mlp_magic.machine.process_alive import alive
from mlp_magic.errors import MlpMagicError
from mlp_magic.world import processes
from mlp_magic.world.keep import ownership
from mlp_magic.world.facts import FACTS


class KeptProcess:
    """A World process this kernel did not start (controller, launcher, plain engine): watched by
    pid and start time (a reused pid is another process), stopped with its tree."""

    popen = None

    def __init__(self, name: str, pid: int, create_time, log_path: str):
        self.name, self.pid, self.create_time, self.log_path = name, pid, create_time, log_path

    def running(self) -> bool:
        return alive((self.pid, self.create_time))

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
    world.kept, world.keep_hours = ownership.kept_now(world.workdir)
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
    ownership.own(world)


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
        ownership.detach(world)
        raise
    return world
