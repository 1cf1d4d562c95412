"""``%%mpirun``: pick or start the World, run the cell, show grouped output, keep the logs."""
from __future__ import annotations

import os
import re
import time

from . import logs
from . import results as status
from .cell_runner import CellRun
from .errors import MlpMagicError
from .grouping import group_results
from .live_display import LiveOutput
from .magic_args import MpirunArgs
from .ranges import fold_ranks, parse_ranks
from .render_html import render_groups_html
from .render_text import render_groups_text
from .topology import topology_from_environment
from .world import World, WorldSpec

POLL_SECONDS = 0.1
# The panel polls every few seconds: only cells running longer than this are published as busy,
# so short cells pay nothing for it.
PUBLISH_BUSY_AFTER = 1.0
_world: World | None = None


class RankFailure(Exception):
    """Raised after the grouped output is shown, so that "Run all" stops at a failed cell.

    Its traceback is one line: the per-rank details are already on screen.
    """

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


class MpirunResult:
    """What ``-o NAME`` stores: per-rank results of one cell."""

    def __init__(self, results: list, log_dir: str, summary_written=None):
        self.results = list(results)
        self.log_dir = log_dir
        self.summary_written = summary_written  # a Future: summary.json is written in the background
        self.by_rank = {r.rank: r for r in results}

    def __getitem__(self, rank: int):
        return self.by_rank[rank]

    def __iter__(self):
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def stdout(self) -> dict:
        return {r.rank: r.stdout for r in self.results}

    @property
    def ok(self) -> bool:
        return all(r.status == status.OK for r in self.results)

    def __repr__(self) -> str:
        counts = {}
        for r in self.results:
            counts[r.status] = counts.get(r.status, 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in counts.items())
        return f"<MpirunResult {len(self.results)} ranks: {summary}; logs in {self.log_dir}>"


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
    _world = World(spec, notice=notice).start()
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


# ------------------------------------------------------------------------------ one cell
def run_cell(args: MpirunArgs, code: str, env, notice=print) -> MpirunResult:
    spec = wanted_spec(args, env)
    ranks = parse_ranks(args.ranks, spec.np) if args.ranks else list(range(spec.np))
    world = ensure_world(spec, restart=args.restart, notice=notice)
    _refuse_if_stuck(world)
    cell_dir = logs.new_cell_dir(args.log_dir)
    live = LiveOutput()
    run = CellRun(world, code, ranks, cell_dir)
    world.active_run = run  # from now on, a later cell is refused while this one's ranks run
    outcome = _follow(run, world, live, args.timeout)
    live.add(run.new_output())
    stack_report = stack_snapshot(world, run.ranks, cell_dir) if outcome == "timeout" else None
    results = _finish(run, outcome)
    if outcome == "done" and any(r.status == status.DIED for r in results):
        outcome = "died"
    if outcome == "died":
        run.death_note = _death_note(world)
    if run.published_busy:  # a long cell: GPU memory and load have moved since the last look
        if outcome == "done":
            world.refresh_gpus(at_most_every=60.0)  # cheap, but not after every long cell
        world.publish()
    if any(r.status != status.OK for r in results):
        logs.write_missing_streams(cell_dir, results)
    summary = logs.write_summary(cell_dir, code, results, {"outcome": outcome})
    _show(results, args, live, cell_dir, _outcome_note(run, outcome), stack_report)
    result = MpirunResult(results, cell_dir, summary)
    _raise_for_failures(result)
    return result


def _refuse_if_stuck(world: World) -> None:
    if world.active_run is None:
        return
    busy = world.active_run.unfinished_ranks()
    if not busy:
        try:  # the client keeps every result forever otherwise (memory grows cell after cell)
            world.client.purge_local_results(jobs=world.active_run.async_result)
        except Exception:
            pass
        world.active_run = None
        return
    raise MlpMagicError(
        f"ranks {fold_ranks(busy)} are still running an earlier cell that timed out or was interrupted "
        "(blocked in a C call?): `%mpirun --stacks` shows where, `%mpirun --restart` starts the World again"
    )


def _follow(run: CellRun, world: World, live: LiveOutput, timeout: float | None) -> str:
    """Wait for the cell, streaming output; return how it ended."""
    deadline = run.started + timeout if timeout else None
    try:
        while True:
            left = POLL_SECONDS if deadline is None else deadline - time.monotonic()
            wait = max(0.0, min(POLL_SECONDS, left))
            if run.wait(wait):
                return "done"
            live.add(run.new_output())
            if not run.published_busy and time.monotonic() - run.started > PUBLISH_BUSY_AFTER:
                world.publish(busy_ranks=run.unfinished_ranks())
                run.published_busy = True
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout"
            if not world.processes_alive():
                return "died"
    except KeyboardInterrupt:
        return "interrupted"


def _finish(run: CellRun, outcome: str) -> list:
    if outcome == "done":
        return run.results()
    if outcome == "died":
        time.sleep(0.3)  # the controller reports the other engines' ends a moment later
    stuck = set(run.unfinished_ranks())
    run.still_running = []
    if outcome in ("timeout", "interrupted"):
        run.interrupt()
        run.still_running = run.unfinished_ranks()
    marker = {"timeout": status.TIMEOUT, "interrupted": status.INTERRUPTED, "died": status.DIED}[outcome]
    results = run.results(unfinished_status=marker)
    for result in results:
        if result.rank in stuck:
            result.status = marker
            result.error = ""  # the KeyboardInterrupt we sent is not the rank's own error
    return results


def _death_note(world: World) -> str:
    from .deaths import death_note, launcher_named_rank

    # The launcher names the first rank to fail once the job has ended, a moment after we notice.
    deadline = time.monotonic() + (2.0 if world.mpi is not None else 0.3)  # plain engines: nannies only
    log_text = world.launcher_log()
    while launcher_named_rank(log_text) is None and time.monotonic() < deadline:
        time.sleep(0.1)
        log_text = world.launcher_log()
    rank_of_pid = {identity["pid"]: rank for rank, identity in world.identities.items()}
    return death_note(log_text, rank_of_pid, world.host_of)


def _outcome_note(run: CellRun, outcome: str) -> str:
    if outcome == "done":
        return ""
    stuck = getattr(run, "still_running", [])
    if outcome == "died":
        return (getattr(run, "death_note", "")
                or "ranks died during the cell; `%mpirun --restart` starts a new World")
    what = "timed out" if outcome == "timeout" else "interrupted"
    if stuck:
        return (f"{what}: ranks {fold_ranks(stuck)} did not stop on SIGINT (blocked in a C call?); "
                "`%mpirun --restart` restarts the World")
    return f"{what}: the running ranks were interrupted; the World is still usable"


def _show(results: list, args: MpirunArgs, live: LiveOutput, cell_dir: str, note: str,
          stack_report: tuple | None = None) -> None:
    """The grouped summary replaces the live output: text always, HTML only for a notebook."""
    groups = [group_results(results)] if args.group else [group_results([r]) for r in results]
    footer = _footer(results, cell_dir, note)
    text = "".join(render_groups_text(g, diff=args.diff) for g in groups)
    if stack_report:
        text = f"{text.rstrip()}\n{stack_report[0]}"
    bundle = {"text/plain": f"{text.rstrip()}\n{footer}"}
    if live.notebook:
        html = "".join(render_groups_html(g, diff=args.diff) for g in groups)
        html += stack_report[1] if stack_report else ""
        bundle["text/html"] = f"{html}<div style='color:#777;font-size:85%'>{_escape(footer)}</div>"
    live.finish(bundle)
    _publish_rich_outputs(results, args.all_outputs)


STACKS_TITLE = "Where each rank is (main thread's Python stack; --> marks the innermost line of your code)"


def stack_snapshot(world: World, ranks: list, log_dir: str | None = None) -> tuple:
    """Collect, save and render every rank's stack: (text, html) grouped by identical stacks."""
    from .results import RankResult
    from .stack_report import format_stack
    from .stacks import collect

    dumps = collect(world, ranks)
    if log_dir:
        logs.write_stacks(log_dir, dumps)
    records = [RankResult(rank=r, host=world.host_of(r), stdout=format_stack(dumps.get(r, "")))
               for r in ranks]
    groups = group_results(records)
    where = f"full dumps: {os.path.join(log_dir, 'stacks')}" if log_dir else ""
    text = f"\n{STACKS_TITLE}\n{render_groups_text(groups)}{where}\n"
    html = (f"<div style='margin-top:0.8em;font-weight:bold'>{_escape(STACKS_TITLE)}</div>"
            f"{render_groups_html(groups)}<div style='color:#777;font-size:85%'>{_escape(where)}</div>")
    return text, html


def _footer(results: list, cell_dir: str, note: str) -> str:
    durations = [r.duration for r in results if r.duration is not None]
    took = f"{max(durations):.2f} s" if durations else "-"
    parts = [f"{len(results)} ranks", took, f"logs: {cell_dir}"]
    return ("mlp_magic: " + note + "\n" if note else "") + " | ".join(parts)


def _escape(text: str) -> str:
    import html

    return html.escape(text).replace("\n", "<br>")


def _publish_rich_outputs(results: list, all_ranks: bool) -> None:
    from IPython.display import publish_display_data

    shown = results if all_ranks else [r for r in results if r.rank == min(x.rank for x in results)]
    for result in shown:
        for output in result.displays:
            data = dict(output.get("data") or {})
            if not data:
                continue
            if all_ranks and len(results) > 1 and "text/plain" in data:
                data["text/plain"] = f"[rank {result.rank}] {data['text/plain']}"
            publish_display_data(data, output.get("metadata") or {})


def _raise_for_failures(result: MpirunResult) -> None:
    failed = [r for r in result.results if r.status != status.OK]
    if not failed:
        return
    kinds = sorted({r.status for r in failed})
    failure = RankFailure(
        f"{' / '.join(kinds)} on ranks {fold_ranks(r.rank for r in failed)} "
        f"({len(failed)} of {len(result)}); details above"
    )
    failure.result = result
    raise failure
