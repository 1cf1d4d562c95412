"""``%mpirun --respawn``'s part that changes the World: a new process for each dead rank, on its
host, taken as that rank (Open MPI with ULFM).

The live ranks spawn the new processes together and wait in MPI until they join
(respawn/rank/mpi_join), so their call is sent first and answered last. Meanwhile each new
process starts the engine program, registers with the controller as a new engine (the hub keeps
a dead engine's id until its heart is declared failed, so the id is seldom the rank's), and says
which rank it stands for; the World maps it (``World.revived``), sets it up as that rank (its
bootstrap's MPI_Init is what the live ranks' spawn waits for), and it joins them.
"""
from __future__ import annotations

import os
import secrets
import time

from mlp_magic.client.job import CALL, CHORE, RankJob, call, call_each
from mlp_magic.client.remote_errors import Failed, one_line
from mlp_magic.core.ranges import by_message, fold_ranks
from mlp_magic.engine import identity as engine_identity
from mlp_magic.errors import MlpMagicError
from mlp_magic.respawn.rank import mpi_join
from mlp_magic.unblock.rank import regroup
from mlp_magic.world import facts
from mlp_magic.world.start.mpi import mca_settings

SPAWN_BASE_S = 30.0          # a new engine's start, registration and set-up on a quiet host
SPAWN_PER_RANK_PER_CPU_S = 3.0   # ... and on a host whose CPUs its ranks share
REGROUP_TIMEOUT_S = 60.0
FORGET_WAIT_S = 5.0


def spawn_deadline(world, count: int) -> float:
    return time.monotonic() + SPAWN_BASE_S + SPAWN_PER_RANK_PER_CPU_S * world.ranks_per_cpu * count


def respawn(world, ranks: list) -> dict:
    """New processes for dead ``ranks``, joined with the live ones in one communicator (``comm``
    on every rank); {rank: pid} of the new ones. One MlpMagicError where it fails; the live ranks
    then still wait in MPI (the World's busy job): ``%mpirun --restart`` is the way out."""
    live = [row.rank for row in world.layout if row.rank not in world.dead_ranks]
    known = set(world.client.ids) | set(world.rank_to_engine.values())
    hosts = {rank: None if world.spec.topology.is_local else world.host_of(rank) for rank in ranks}
    token = secrets.token_hex(8)
    settings = mca_settings(world.mpi, os.environ)
    arguments = {rank: (hosts, world.np, rank, token, settings) for rank in live}
    spawning = RankJob.apply_each(world, CALL, arguments, mpi_join.spawn_dead)
    world.claim(spawning)   # no cell queues behind a spawn
    try:
        _take_in(world, spawning, ranks, known)
    finally:   # the controller's connection, left for the new engines on their hosts
        _forget_connection(world, live, token)
    return {rank: world.identities[rank]["pid"] for rank in ranks}


def _forget_connection(world, live: list, token: str) -> None:
    """The live ranks remove the connection file they left; not waited for past a few seconds (the
    live ranks of a failed spawn are still in MPI: the World's stop ends them, and the file)."""
    forgetting = RankJob.apply(world, CHORE, live, mpi_join.forget_connection, token)
    if forgetting.wait_all(time.monotonic() + FORGET_WAIT_S):
        forgetting.release()


def _take_in(world, spawning, ranks: list, known: set) -> None:
    """The new engines registered, mapped to their ranks, set up, joined with the live ranks."""
    deadline = spawn_deadline(world, len(ranks))
    engines = _new_engines(world, known, len(ranks), deadline, spawning)
    _take_as_ranks(world, engines, ranks, deadline)
    setups = {rank: world.send_bootstrap(rank) for rank in ranks}   # first: its MPI_Init ends the spawn
    joining = RankJob.apply_each(world, CHORE, {rank: (rank,) for rank in ranks}, mpi_join.join_live_ranks)
    job = RankJob(world, CHORE, ranks, [setups[rank] for rank in ranks])
    for waited in (job, joining, spawning):
        waited.wait_all(deadline)
    _refuse_failures(world, [job, joining, spawning], ranks)   # the new ranks' failure says why first
    world.release_busy()
    for waited in (job, joining):
        waited.release()
    facts.save_facts(world)   # a kernel attaching later finds the new ranks


def _new_engines(world, known: set, count: int, deadline: float, spawning) -> list:
    """The ids of the ``count`` engines that register beyond ``known``, before ``deadline``."""
    while True:
        new = sorted(set(world.client.ids) - known)
        if len(new) >= count:
            return new[:count]
        if spawning.done() or time.monotonic() > deadline or world.lifeline_ended():
            _refuse_failures(world, [spawning], [])
            raise MlpMagicError(f"%mpirun --respawn: {count - len(new)} of the {count} new processes did not "
                                f"register with the World's controller in time; the live ranks wait for them "
                                f"in MPI_Comm_spawn: `%mpirun --restart` starts the World again; logs in "
                                f"{world.workdir}")
        time.sleep(0.05)


def _take_as_ranks(world, engines: list, ranks: list, deadline: float) -> None:
    """Each new engine says which rank it stands for; the World takes it as that rank."""
    identify = engine_identity.identify
    asked = {eid: world.client[eid].apply_async(identify, world.controller_ip) for eid in engines}
    for eid, result in asked.items():
        result.wait(max(0.0, deadline - time.monotonic()))
        identity = result.get(0) if result.ready() and result.successful() else None
        if identity is None or identity["rank"] not in ranks:
            raise MlpMagicError(f"%mpirun --respawn: new engine {eid} did not say which dead rank it "
                                f"stands for ({identity and identity['rank']!r}); logs in {world.workdir}")
        world.revived(identity["rank"], eid, identity)


def _refuse_failures(world, jobs: list, ranks: list) -> None:
    for job in jobs:
        failed = {rank: one_line(error) for rank in job.ranks
                  if (error := job.error(rank)) is not None}
        failed.update({rank: answer["error"] for rank, answer in job.answers().items()
                       if isinstance(answer, dict) and answer.get("error")})
        late = job.unanswered()
        if failed or late:
            what = by_message(failed)
            what += f"{'; ' if what else ''}ranks {fold_ranks(late)} did not finish in time" if late else ""
            raise MlpMagicError(f"%mpirun --respawn of {fold_ranks(ranks) or 'the dead ranks'} failed: "
                                f"{what}; `%mpirun --restart` starts the World again; "
                                f"logs in {world.workdir}")


def remake_default_group(world, ranks: list) -> list:
    """Where the live ranks had torch's default group, it is made again over every rank, the new
    ones too, at a new store on rank 0's host (the old one may have died with rank 0); the lines
    saying so."""
    live = [rank for rank in range(world.np) if rank not in ranks]
    answers = call(world, live, regroup.group_to_remake, timeout=REGROUP_TIMEOUT_S,
                   what="asking the live ranks for torch's default group")
    groups = [answer for answer in answers.values() if answer is not None]
    if not groups:
        return []
    found = groups[0]
    if isinstance(found, Failed) or "error" in found:
        why = found.message if isinstance(found, Failed) else found["error"]
        return [f"torch's default group was not made again: {why}"]
    address = world.master[0]
    port = call(world, [0], engine_identity.free_port, timeout=REGROUP_TIMEOUT_S,
                what="a free port on rank 0")[0]
    world.master = (address, port)
    made = call_each(world, {rank: (found["backend"], found["timeout"], address, port, rank, world.np)
                             for rank in range(world.np)},
                     regroup.make_default_group, timeout=REGROUP_TIMEOUT_S,
                     what="making torch's default group again")
    failed = {rank: answer.message for rank, answer in made.items() if isinstance(answer, Failed)}
    if failed:
        return [f"torch's default group was not made again: {by_message(failed)}"]
    backends = ", ".join(dict.fromkeys(part.rpartition(":")[2] for part in found["backend"].split(",")))
    return [f"torch's default group made again over all {world.np} ranks ({backends}, at {address}:{port})"]
