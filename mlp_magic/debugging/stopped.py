"""``%mpirun --pdb CMD`` and ``%%mpirun --pdb``: pdb's commands on every rank stopped at a breakpoint.

The ranks' cell is still running (the World's ``busy_job``): their main threads wait inside pdb,
so each command goes on the control channel (debugging/rank/breakpoints), one request per rank
at once, and the answers come back as pdb wrote them, grouped and folded like a cell's output.
A command that moves the ranks on (``n``, ``s``, ``c``...) is followed as the cell is
(mpirun/run.follow): its output streams, and it ends when every rank stopped again or finished.
"""
from __future__ import annotations

import base64
import pickle
import time

from mlp_magic.core import results as status
from mlp_magic.core.ranges import parse_ranks, rank_words
from mlp_magic.core.results import RankResult
from mlp_magic.debugging.pure.stops import parse_command, stops_text
from mlp_magic.errors import MlpMagicError
from mlp_magic.mpirun.cell import Cell, Outcome
from mlp_magic.mpirun.run import follow
from mlp_magic.mpirun.show import raise_for_failures
from mlp_magic.mpirun.whole_output import keep_whole_output
from mlp_magic.output import display
from mlp_magic.client.ipp_private import send_control
from mlp_magic.client.remote_errors import Failed

REQUEST = "mlp_pdb_request"   # debugging/rank/breakpoints.REQUEST (rank code is not loaded here)
# A command that leaves the rank where it is (p, where, list): its answer within this. The rank's
# control channel serves one request at a time (an interrupt waits behind it): a longer command
# goes on, and its answer comes with the next `%mpirun --pdb`.
ANSWER_WAIT_S = 2.0
STEP_REPLY_S = 0.5     # a step this quick answers in its reply; a longer one is followed
STEP_BOUND_S = 30.0    # a step (n, s, r, unt) is followed this long; ranks still running are named
QUIT_GRACE_S = 3.0     # after q: the ranks not stopped (in a collective with the others?) are interrupted
REPLY_MARGIN_S = 5.0   # the control channel's own time, on top of the rank's wait


def pdb(context, options) -> None:
    cell = paused_cell(context.owner.world)
    code = (context.cell or "").strip() and context.cell
    if code and (options.expression or "").strip():
        raise MlpMagicError("%%mpirun --pdb: give a pdb command on the line or a block of Python in "
                            "the cell, not both")
    if not code and not (options.expression or "").strip():
        print(listing(cell))
        pending = {rank: reply for rank, reply in ask(cell, sorted(cell.paused_ranks()), {}, 0).items()
                   if reply and reply.get("output")}   # answers of commands that outlived their request
        if pending:
            _show_answers(context, cell, pending, title="(Pdb) answers that came late")
        return
    ranks = chosen_ranks(cell, options.ranks)
    if code:
        _show_answers(context, cell, ask(cell, ranks, {"code": code}, ANSWER_WAIT_S))
        return
    command = parse_command(options.expression)
    try:
        if command.quits:
            quit_debugging(context, cell, ranks)
        elif command.resumes:
            _resume(context, cell, ranks, command, options.timeout)
        else:
            _show_answers(context, cell, ask(cell, ranks, {"command": command.text}, ANSWER_WAIT_S),
                          title=f"(Pdb) {command.text}")
    except KeyboardInterrupt:   # Ctrl-C while waiting for an answer: the debugging ends
        quit_debugging(context, cell, sorted(cell.paused_ranks()))


def stopped_cell(world) -> Cell | None:
    """The cell whose ranks are stopped at a breakpoint, or None."""
    cell = getattr(world, "busy_job", None) if world is not None else None
    return cell if isinstance(cell, Cell) and cell.paused_ranks() else None


def paused_cell(world) -> Cell:
    """The cell whose ranks are stopped at a breakpoint; one error where there is none."""
    cell = stopped_cell(world)
    if cell is None:
        raise MlpMagicError("%mpirun --pdb: no rank is stopped at a breakpoint (breakpoint() in a "
                            "%%mpirun cell stops the ranks that reach it)")
    return cell


def chosen_ranks(cell: Cell, spec: str | None) -> list:
    """The stopped ranks, or those of ``--ranks``; a rank that is not stopped is one error."""
    stopped = cell.paused_ranks()
    if not spec:
        return sorted(stopped)
    ranks = parse_ranks(spec, cell.world.np)
    absent = [rank for rank in ranks if rank not in stopped]
    if absent:
        raise MlpMagicError(f"%mpirun --pdb --ranks {spec}: {rank_words(absent)} not stopped at a "
                            f"breakpoint (stopped: {rank_words(sorted(stopped))})")
    return ranks


def listing(cell: Cell) -> str:
    stopped = cell.paused_ranks()
    running = [rank for rank in cell.unfinished_ranks() if rank not in stopped]
    finished = [rank for rank in cell.ranks if rank not in stopped and rank not in running]
    return stops_text(stopped, running=running, finished=finished)


def ask(cell: Cell, ranks: list, content: dict, wait: float) -> dict:
    """{rank: reply or None} of one request on each rank's control channel, sent at once; a rank
    whose reply says where it stopped updates the cell's record of it (after ``up``, a step)."""
    return ask_each(cell, {rank: content for rank in ranks}, wait)


def ask_each(cell: Cell, contents: dict, wait: float) -> dict:
    """``ask`` with a request of its own for each rank ({rank: content})."""
    world = cell.world
    sent = {rank: send_control(world.client, world.rank_to_engine[rank], REQUEST, {**content, "wait": wait})
            for rank, content in contents.items()}
    if any(future is None for future in sent.values()):
        raise MlpMagicError("%mpirun --pdb: this ipyparallel client cannot send control requests "
                            "(Client._send_control_request): mlp_magic needs ipyparallel>=9.0,<10")
    deadline = time.monotonic() + wait + REPLY_MARGIN_S
    replies = {}
    for rank, future in sent.items():
        try:
            replies[rank] = future.result(timeout=max(0.0, deadline - time.monotonic()))[0]["content"]
        except Exception:  # noqa: BLE001 - no answer in time (or the engine went): shown as such
            replies[rank] = None
        else:
            _note_stop(cell, rank, replies[rank])
    return replies


def _note_stop(cell: Cell, rank: int, reply: dict) -> None:
    if reply.get("state") == "stopped" and reply.get("where"):
        stop = {"stop": reply.get("stop", 0), "where": reply["where"]}
        cell.job.requests.stopped(cell.index_of(rank), stop)


def _resume(context, cell: Cell, ranks: list, command, timeout: float | None) -> None:
    """Move the ranks on, then follow the cell until they stop again or it ends."""
    cell.job.requests.resumed([cell.index_of(rank) for rank in ranks])
    replies = ask(cell, ranks, {"command": command.text}, STEP_REPLY_S)
    if command.continues:   # like a cell: until the next stop or the end (or --timeout)
        _ended(context, cell, follow(cell, time.monotonic() + timeout if timeout else None))
    else:
        bound = timeout or STEP_BOUND_S
        result = follow(cell, time.monotonic() + bound, give_up=False)
        _ended(context, cell, result)
        if result is None:
            running = [rank for rank in cell.unfinished_ranks() if rank not in cell.paused_ranks()]
            print(f"mlp_magic: {rank_words(running)} still running `{command.text}` after {bound:g} s "
                  "(in a collective the other ranks have not reached?): `%mpirun --pdb` lists them "
                  "once they stop; `%mpirun --pdb q` or Ctrl-C ends the debugging")
    said = {rank: reply for rank, reply in replies.items() if reply and reply.get("output")}
    if said:
        _show_answers(context, cell, said, title=f"(Pdb) {command.text}")


def quit_debugging(context, cell: Cell, ranks: list) -> None:
    """``q`` on the stopped ranks: their cells end with "quit at the debugger"; the ranks not
    stopped are interrupted a moment later, and the cell's end is shown."""
    every = sorted(ranks) == sorted(cell.paused_ranks())   # the debugging ends (not some ranks')
    cell.job.requests.resumed([cell.index_of(rank) for rank in ranks])
    ask(cell, ranks, {"command": "q"}, STEP_REPLY_S)
    _ended(context, cell, follow(cell, time.monotonic() + QUIT_GRACE_S, quitting=every))


def _ended(context, cell: Cell, result) -> None:
    """What the cell's own end does, now that it came (or it stopped again): ``-o NAME`` keeps
    the result; ranks that failed fail the notebook's cell."""
    if result is None:
        return
    if cell.args.out:
        keep_whole_output(cell.world, result, cell.args.out, context.notice)
        context.store(cell.args.out, result)
    if cell.ending.outcome is not Outcome.PAUSED:
        raise_for_failures(result)


def _show_answers(context, cell: Cell, replies: dict, title: str = "") -> None:
    """Each rank's answer as a cell's output: grouped, numbers folded; no answer named."""
    results = [RankResult(rank=rank, host=cell.world.host_of(rank),
                          stdout=reply.get("output", "") if reply else "",
                          status=status.OK if _answered(reply) else status.TIMEOUT)
               for rank, reply in sorted(replies.items())]
    silent = [r.rank for r in results if r.status != status.OK]
    note = (f"{rank_words(silent)} still running the command after {ANSWER_WAIT_S:g} s (or busy with "
            "an earlier one): `%mpirun --pdb` shows its answer once it is done") if silent else ""
    bundle = display.summary(results, group=True, diff=False, footer=("mlp_magic: " + note) if note else "",
                             html_too=True, fold=True, follows=display.rank_maps(cell.world.layout))
    text = (f"{title}:\n" if title else "") + bundle["text/plain"]
    context.show(text, bundle["text/html"])


class ByControl:
    """Our functions called on stopped ranks, on their control channel (values/compare's
    ``reach``): they run beside pdb, and what they evaluate, they evaluate in the stopped frame."""

    def __init__(self, cell: Cell):
        self.cell = cell

    def call(self, ranks: list, function, *args, timeout=None, what: str = "") -> dict:
        return self.call_each({rank: args for rank in ranks}, function, timeout, what)

    def call_each(self, arguments: dict, function, timeout=None, what: str = "") -> dict:
        target = f"{function.__module__}:{function.__qualname__}"
        contents = {rank: {"call": base64.b64encode(pickle.dumps((target, tuple(args)))).decode()}
                    for rank, args in arguments.items()}
        replies = ask_each(self.cell, contents, timeout or ANSWER_WAIT_S)
        silent = [rank for rank, reply in replies.items() if reply is None]
        if silent:
            raise MlpMagicError(f"{what or 'the call'}: {rank_words(silent)} did not answer on the "
                                "control channel (stopped in a C call?)")
        return {rank: Failed(reply["error"]) if "error" in reply else _unpickled(reply["value"])
                for rank, reply in replies.items()}


def _answered(reply) -> bool:
    return bool(reply) and reply.get("state") in ("stopped", "ended", "called")


def _unpickled(text: str):
    return pickle.loads(base64.b64decode(text))
