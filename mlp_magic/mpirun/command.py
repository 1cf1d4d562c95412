"""``%%mpirun``: pick or start the World, run the cell, show grouped output, keep the logs."""
from __future__ import annotations

import re
import time

from mlp_magic.core import results as status
from mlp_magic.core.deadline import until
from mlp_magic.world.pure.deaths import death_note, launcher_named_rank
from mlp_magic.core.ranges import fold_ranks, parse_ranks
from mlp_magic.core.results import MpirunResult
from mlp_magic.core.topology import topology_from_environment
from mlp_magic.errors import MlpMagicError, RankFailure
from mlp_magic.mpirun import collector
from mlp_magic.output import display, logs
from mlp_magic.mpirun.args import MpirunArgs
from mlp_magic.mpirun.cell_run import CellRun, Outcome
from mlp_magic.stacks.snapshot import stack_snapshot
from mlp_magic.world.start.display import StartProgress
from mlp_magic.world.world import World, WorldSpec

# A long cell's GPU inventory (memory, load) is taken again after it, at most this often.
GPUS_AFTER_LONG_CELL_EVERY_S = 60.0
LONG_CELL_S = 1.0
_world: World | None = None


def current_world() -> World | None:
    return _world if _world is not None and _world.client is not None else None


def shutdown_worlds() -> None:
    global _world
    if _world is not None:
        _world.stop()
        _world = None


# ------------------------------------------------------------------------------ the World
def wanted_spec(args: MpirunArgs, env) -> WorldSpec:
    world = current_world()
    explicit_hosts = args.hostfile or args.hosts is not None
    if world is not None and not explicit_hosts and not args.oversubscribe and args.np in (None, world.np):
        return world.spec  # a bare %%mpirun keeps the World it has
    topology = topology_from_environment(env, hostfile=args.hostfile, hosts=args.hosts)
    _refuse_ssh_details(topology)
    np = args.np or _default_np(env, topology)
    spec = WorldSpec(topology, np, args.oversubscribe)
    topology.layout(np, args.oversubscribe)  # refuse a bad -np before touching the running World
    return spec


def _refuse_ssh_details(topology) -> None:
    """mpiexec's ssh launcher takes host names only: a user or port from a pssh-style list
    would be silently dropped, so say where they belong instead."""
    for host in topology.hosts:
        if host.user or host.port:
            detail = f"user {host.user}" if host.user else f"port {host.port}"
            raise MlpMagicError(
                f"{topology.source}: {host.name} has {detail}, which mpiexec cannot use; put it in "
                f"~/.ssh/config (Host {host.name} / User / Port) and list the host by name")


def _default_np(env, topology) -> int:
    value = env.get("MLP_MPI_NP", "").strip()
    if value and not topology.is_local:
        if not re.fullmatch(r"[0-9]{1,7}", value) or int(value) <= 0:
            raise MlpMagicError(f"$MLP_MPI_NP must be a positive integer, got {value!r}")
        return int(value)
    return topology.total_slots


def ensure_world(spec: WorldSpec, restart: bool = False, notice=print) -> World:
    global _world
    world = current_world()
    if world is not None and world.spec == spec and not restart and world.alive():
        return world
    if world is not None:
        reason = ("restart asked" if restart
                  else "it stopped" if not world.alive() else "hosts or -np changed")
        notice(f"mlp_magic: stopping the World of {world.np} ranks ({reason})")
        shutdown_worlds()
    started = time.monotonic()
    progress = StartProgress()
    try:
        _world = World(spec, notice=notice, progress=progress).start()
    finally:
        progress.close()
    notice(f"mlp_magic: started {_world.describe()} in {time.monotonic() - started:.1f} s")
    return _world


def line_command(args: MpirunArgs, env, notice=print):
    """``%mpirun --status | --stop | --restart | --stacks``: a line of text, or (for
    --stacks) a (text, html) pair."""
    if args.stacks:
        world = current_world()
        if world is None:
            raise MlpMagicError("%mpirun --stacks: no World running")
        return stack_snapshot(world, [row.rank for row in world.layout], logs.new_cell_dir(args.log_dir))
    if args.stop:
        world = current_world()
        shutdown_worlds()
        return f"stopped the World of {world.np} ranks" if world else "no World running"
    if args.restart:
        return ensure_world(wanted_spec(args, env), restart=True, notice=notice).describe()
    world = current_world()
    return world.describe() if world else "no World running (the next %%mpirun cell starts one)"


def values_command(args: MpirunArgs, user_ns, env):
    """``%mpirun --compare EXPR | --pull NAME | --push NAME`` on the running World's ranks:
    a Comparison, {rank: value}, or a line saying what was pushed."""
    from mlp_magic import config
    from mlp_magic.values import transfer, compare as values

    if args.compare is not None:
        values.check_expression(args.compare)   # a syntax error runs nothing
    world = current_world()
    if world is None:
        raise MlpMagicError("%mpirun --compare/--pull/--push: no World running (a %%mpirun cell starts one)")
    refuse_if_stuck(world)
    ranks = parse_ranks(args.ranks, world.np) if args.ranks else list(range(world.np))
    if args.compare is not None:
        return values.compare(world, args.compare, ranks, args.timeout)
    if args.pull:
        return transfer.pull(world, args.pull, ranks, config.pull_cap(env), args.timeout)
    return transfer.push(world, args.push, user_ns, ranks, config.pull_cap(env), args.timeout)


# ------------------------------------------------------------------------------ one cell
def run_cell(args: MpirunArgs, code: str, env, notice=print) -> MpirunResult:
    """Run ``code`` on the ranks; the grouped output is shown; RankFailure if a rank failed."""
    spec = wanted_spec(args, env)
    ranks = parse_ranks(args.ranks, spec.np) if args.ranks else list(range(spec.np))
    world = ensure_world(spec, restart=args.restart, notice=notice)
    refuse_if_stuck(world)
    with collector.cell_objects_only():
        result = _run_on(world, ranks, args, code)
    _raise_for_failures(result)
    return result


def _run_on(world: World, ranks: list, args: MpirunArgs, code: str) -> MpirunResult:
    cell_dir = logs.new_cell_dir(args.log_dir)
    live = display.LiveOutput(fold=args.fold and args.group and not args.diff)
    run = CellRun(world, code, ranks, cell_dir)
    world.active_run = run  # from now on, a later cell is refused while this one's ranks run
    run.outcome = _follow(run, world, live, args.timeout)
    live.add(run.new_output(every_rank=True))
    stacks = stack_snapshot(world, run.ranks, cell_dir) if run.outcome is Outcome.TIMEOUT else None
    results = _finish(run)
    if run.done():
        world.live.cell_ended(cell_dir)
    _after_the_cell(run, world, results)
    summary = logs.write_summary(cell_dir, code, results, {"outcome": run.outcome.value})
    footer = display.footer(results, cell_dir, _outcome_note(run))
    bundle = display.summary(results, group=args.group, diff=args.diff, footer=footer,
                             html_too=live.notebook, stack_report=stacks, fold=args.fold,
                             follows=display.rank_maps(world.layout))
    live.finish(bundle)
    display.publish_rich_outputs(results, args.all_outputs)
    return MpirunResult(results, cell_dir, summary, bundle["text/plain"], bundle.get("text/html", ""))


def refuse_if_stuck(world: World) -> None:
    if world.active_run is None:
        return
    world.active_run.settle()
    busy = world.active_run.unfinished_ranks()
    if not busy:
        world.active_run.release()
        world.active_run = None
        return
    raise MlpMagicError(
        f"ranks {fold_ranks(busy)} are still running an earlier cell that timed out or was interrupted "
        "(blocked in a C call?): `%mpirun --stacks` shows where, `%mpirun --restart` starts the World again"
    )


def _follow(run: CellRun, world: World, live: display.LiveOutput, timeout: float | None) -> Outcome:
    """Wait for the cell, streaming output; return how it ended. The wait wakes on events only
    (ranks/waiting), and when output already in is due on screen (``live.wake_at``)."""
    deadline = run.started + timeout if timeout else None
    try:
        while True:
            wake = [t for t in (deadline, live.wake_at()) if t is not None]
            if run.wait(min(wake) if wake else None):
                return Outcome.DONE
            live.add(run.new_output())
            if deadline is not None and time.monotonic() >= deadline:
                return Outcome.TIMEOUT
            if run.world_ended():
                return Outcome.DIED
    except KeyboardInterrupt:
        return Outcome.INTERRUPTED


def _finish(run: CellRun) -> list:
    """Every rank's result; the ranks still running are interrupted first (timeout, Ctrl-C)
    and those that had not finished are marked with the outcome."""
    if run.outcome is Outcome.DONE:
        results = run.results()
        if any(r.status == status.DIED for r in results):
            run.outcome = Outcome.DIED
        return results
    if run.outcome is Outcome.DIED:
        # the controller reports the other engines' ends a moment later: their requests end then
        run.requests.wait_done(time.monotonic() + 0.3)
    stuck = set(run.unfinished_ranks())
    if run.outcome in (Outcome.TIMEOUT, Outcome.INTERRUPTED):
        run.interrupt()
        run.still_running = run.unfinished_ranks()
    marker = run.outcome.unfinished_status
    results = run.results(unfinished_status=marker)
    for result in results:
        if result.rank in stuck:
            result.status = marker
            result.error = ""  # the KeyboardInterrupt we sent is not the rank's own error
    return results


def _after_the_cell(run: CellRun, world: World, results: list) -> None:
    """Name the rank that died, refresh what the panel shows, keep what ranks could not log."""
    if run.outcome is Outcome.DIED:
        run.death_note = _death_note(world)
    if run.outcome is Outcome.DONE and time.monotonic() - run.started > LONG_CELL_S:
        # GPU memory and load have moved since the last look: cheap, but not after every cell
        world.refresh_gpus(at_most_every=GPUS_AFTER_LONG_CELL_EVERY_S)
    if any(r.status != status.OK for r in results):
        logs.write_missing_streams(run.log_dir, results)


def _death_note(world: World) -> str:
    """The launcher names the first rank to fail once the job has ended, a moment after we notice.
    Nothing announces that line (a file: no event for it without inotify, which the standard
    library lacks), so its log is read again on core/deadline.until's pace until it names a rank,
    or every launcher process has ended (its log is then complete), or the deadline."""
    deadline = time.monotonic() + (2.0 if world.mpi is not None else 0.3)  # plain engines: their own
    read = [""]

    def complete() -> bool:
        ended = not any(process.running() for process in world.processes[1:])
        read[0] = world.launcher_log()
        return ended or launcher_named_rank(read[0]) is not None

    until(complete, deadline, longest_s=0.1)
    pid_of_rank = {rank: identity["pid"] for rank, identity in world.identities.items()}
    return death_note(read[0], world.exited_ranks(), pid_of_rank, world.host_of)


def _outcome_note(run: CellRun) -> str:
    if run.outcome is Outcome.DONE:
        return ""
    if run.outcome is Outcome.DIED:
        return run.death_note or "ranks died during the cell; `%mpirun --restart` starts a new World"
    what = "timed out" if run.outcome is Outcome.TIMEOUT else "interrupted"
    if run.still_running:
        return (f"{what}: ranks {fold_ranks(run.still_running)} did not stop on SIGINT (blocked in a C "
                "call?); `%mpirun --restart` restarts the World")
    return f"{what}: the running ranks were interrupted; the World is still usable"


def _raise_for_failures(result: MpirunResult) -> None:
    failed = [r for r in result.results if r.status != status.OK]
    if failed:
        kinds = sorted({r.status for r in failed})
        raise RankFailure(f"{' / '.join(kinds)} on ranks {fold_ranks(r.rank for r in failed)} "
                          f"({len(failed)} of {len(result)}); details above", result)
