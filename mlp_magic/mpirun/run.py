"""A ``%%mpirun`` cell, in one direction: plan, start, run, show.

    plan   mpirun/plan: the World it needs, its ranks
    start  world/owner: that World, started or reused, and idle
    run    mpirun/cell: the job sent, followed (streamed, timed out, interrupted), its results
    show   mpirun/show: logs, the grouped and folded summary, -o's result, the failure raised
"""
from __future__ import annotations

import time

from mlp_magic.core import results as status
from mlp_magic.core.results import MpirunResult
from mlp_magic.mpirun import collector
from mlp_magic.mpirun.cell import Cell, Ending, Outcome
from mlp_magic.mpirun.plan import chosen_ranks, live_ranks, wanted_spec
from mlp_magic.mpirun.show import raise_for_failures, show, show_paused
from mlp_magic.output import display, logs
from mlp_magic.stacks.snapshot import stack_snapshot
from mlp_magic.unblock.verbs import free_survivors
from mlp_magic.world.deaths import dead_peers_note, how_ranks_died, lost_hosts_note, survivors_died_note
from mlp_magic.world.host_watch import HostWatch

# Ranks stopped at a breakpoint while the others neither finish, stop nor write for this long
# (waiting in a collective for the stopped ones?): the cell shows the stopped ones.
PAUSE_SETTLES_S = 2.0
# After a rank's death (the World survives it: ULFM), the survivors get this long to end the cell
# on their own (one blocked in a collective with the dead rank does not), then are interrupted.
# Those that do end on their own do so at once (MPI's error within 10 ms, gloo's closed connection).
SURVIVORS_GRACE_S = 1.0
# A long cell's GPU inventory (memory, load) is taken again after it, at most this often.
GPUS_AFTER_LONG_CELL_EVERY_S = 60.0
LONG_CELL_S = 1.0


def run_cell(owner, args, code: str, env, notice=print, world=None) -> MpirunResult:
    """Run ``code`` on the ranks; the grouped output is shown; RankFailure if a rank failed.
    ``world``: the World to run on as it is (an inspection), else the one ``args`` plan."""
    logs.check_root(args.log_dir)   # before anything starts: nothing changes on a bad one
    if world is None:
        spec = wanted_spec(args, env, owner.world)
        ranks = chosen_ranks(args.ranks, spec.np)   # a bad --ranks starts nothing
        world = owner.ensure(spec, restart=args.restart, notice=notice, keep=getattr(args, "keep", False))
    else:
        ranks = chosen_ranks(args.ranks, world.np)
    ranks = live_ranks(world, ranks, bool(args.ranks), notice)
    world = owner.idle_world(world, notice)
    with collector.cell_objects_only():
        result = _run_on(world, ranks, args, code)
    raise_for_failures(result)
    return result


def _run_on(world, ranks: list, args, code: str) -> MpirunResult:
    cell = Cell(world, code, ranks, logs.new_cell_dir(args.log_dir), args)
    world.claim(cell)   # from now on, a later cell is refused while this one's ranks run
    return follow(cell, cell.started + args.timeout if args.timeout else None)


def follow(cell: Cell, deadline: float | None, give_up: bool = True,
           quitting: bool = False) -> MpirunResult | None:
    """Follow the cell until it ends (or its ranks stop at breakpoints), then show it. Also after
    a debugger command moved stopped ranks on (debugging/stopped): ``give_up`` False leaves ranks
    still running at ``deadline`` alone (a step into a collective), and returns None;
    ``quitting``: the debugger was told to quit on every stopped rank."""
    args, world = cell.args, cell.world
    live = display.StreamingOutput(fold=args.fold and args.group and not args.diff)
    watch = HostWatch.of_cell(world, cell.ranks, cell.job.requests.news)
    try:
        outcome, note = _follow(cell, live, deadline, watch)
    finally:
        watch.stop()
    live.add(cell.new_output(every_rank=True), cell.displays.new_bars())
    if outcome is Outcome.PAUSED:
        cell.ended(Ending(outcome))
        return show_paused(cell, live)
    if outcome is Outcome.TIMEOUT and not give_up:   # the cell is not over: its ranks run on
        cell.ended(Ending(outcome))
        live.finish({"text/plain": ""})
        return None
    stacks = stack_snapshot(world, cell.ranks, cell.log_dir) if outcome is Outcome.TIMEOUT else None
    outcome, results, still_running = _finish(cell, outcome)
    if outcome is Outcome.DIED:
        note = how_ranks_died(world)
    elif outcome is Outcome.RANK_DIED:
        note = survivors_died_note(world, cell.ranks)
    elif outcome is Outcome.DONE and world.dead_ranks:
        note = dead_peers_note(world, results)
    badly = bool(still_running) or any(r.status != status.OK for r in results)
    cell.ended(Ending(outcome, tuple(still_running), note, quitting, badly))
    if cell.job.done():
        world.live.cell_ended(cell.log_dir)
    _after_the_cell(cell, world, results)
    return show(cell, cell.code, results, args, live, stacks)


def _follow(cell: Cell, live: display.StreamingOutput, deadline: float | None, watch: HostWatch) -> tuple:
    """Wait for the cell, streaming output: (how it ended, the lost hosts' note). The wait wakes on
    events only (client/waiting), and when output already in is due on screen (``live.wake_at``);
    a host that stops answering wakes it too (world/host_watch), and so does a rank stopping at
    a breakpoint."""
    settled = _QuietWhileStopped(cell.job.requests)
    survivors_until = None   # once a rank of the cell died: when the others are interrupted
    try:
        while True:
            wake = [t for t in (deadline, live.wake_at(), settled.at(), survivors_until) if t is not None]
            if cell.job.wait(min(wake) if wake else None):
                return Outcome.DONE, ""
            chunks = cell.new_output()
            live.add(chunks, cell.displays.new_bars())
            cell.forwarded.forward(cell.displays, live)
            if cell.job.requests.all_paused() or settled.paused(bool(chunks)):
                return Outcome.PAUSED, ""
            if deadline is not None and time.monotonic() >= deadline:
                return Outcome.TIMEOUT, ""
            if cell.job.world_ended():
                return Outcome.DIED, ""
            dead = cell.world.dead_ranks.keys() & set(cell.ranks)
            if dead:
                survivors_until = survivors_until or time.monotonic() + SURVIVORS_GRACE_S
                if not set(cell.unfinished_ranks()) - dead or time.monotonic() >= survivors_until:
                    return Outcome.RANK_DIED, ""
            if watch.lost:
                return Outcome.HOST_LOST, _lost_hosts(cell, watch.lost)
    except KeyboardInterrupt:
        return Outcome.INTERRUPTED, ""


class _QuietWhileStopped:
    """Whether ranks stopped at a breakpoint while the others went quiet (neither finished,
    stopped nor wrote) for ``PAUSE_SETTLES_S``: the cell then shows the stopped ones."""

    def __init__(self, requests):
        self._requests = requests
        self._seen: tuple = ()
        self._since = time.monotonic()

    def at(self) -> float | None:
        return self._since + PAUSE_SETTLES_S if self._requests.paused else None

    def paused(self, wrote: bool) -> bool:
        now, state = time.monotonic(), (len(self._requests.paused), len(self._requests.unfinished()))
        if wrote or state != self._seen:
            self._seen, self._since = state, now
            return False
        return bool(self._requests.paused) and now - self._since >= PAUSE_SETTLES_S


def _finish(cell: Cell, outcome: Outcome) -> tuple:
    """(outcome, every rank's result, the ranks still running): the ranks still running are
    interrupted first (timeout, Ctrl-C) and those that had not finished are marked with the
    outcome; a cell whose ranks all ended, one of them dead, died."""
    if outcome is Outcome.DONE:
        results = cell.results()
        return (Outcome.DIED if any(r.status == status.DIED for r in results) else outcome), results, []
    if outcome is Outcome.DIED:
        # the controller reports the other engines' ends a moment later: their requests end then
        cell.job.requests.wait_done(time.monotonic() + 0.3)
    stuck = set(cell.unfinished_ranks())
    lost = {rank for ranks in cell.world.lost_hosts.values() for rank in ranks}
    dead = set(cell.world.dead_ranks)
    still_running = []
    if outcome in (Outcome.TIMEOUT, Outcome.INTERRUPTED, Outcome.HOST_LOST, Outcome.RANK_DIED):
        cell.job.interrupt(skip=frozenset(lost | dead))
        still_running = [rank for rank in cell.unfinished_ranks() if rank not in dead]
        if outcome is Outcome.RANK_DIED and still_running:   # in a collective with the dead rank?
            still_running = free_survivors(cell.world, cell.job, still_running)
    marker = outcome.unfinished_status
    results = cell.results(unfinished_status=marker)
    for result in results:
        if result.rank in stuck and result.status != status.QUIT:   # a stopped rank quit at its debugger
            result.status = status.UNREACHABLE if result.rank in lost else \
                status.DIED if result.rank in dead else marker
            result.error = ""  # the KeyboardInterrupt we sent is not the rank's own error
    return outcome, results, still_running


def _lost_hosts(cell: Cell, lost: dict) -> str:
    """Hosts that stopped answering: their ranks are given up on, the World with them; the note."""
    world = cell.world
    world.hosts_lost(lost, cell.ranks)
    return lost_hosts_note(world.lost_hosts, lost)


def _after_the_cell(cell: Cell, world, results: list) -> None:
    """Refresh what the panel shows, keep what ranks could not log."""
    if cell.ending.outcome is Outcome.DONE and time.monotonic() - cell.started > LONG_CELL_S:
        # GPU memory and load have moved since the last look: cheap, but not after every cell
        world.refresh_gpus(at_most_every=GPUS_AFTER_LONG_CELL_EVERY_S)
    if any(r.status != status.OK for r in results):
        logs.write_missing_streams(cell.log_dir, results)
