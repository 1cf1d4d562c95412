"""Breakpoints on every rank, on a real World of 4 ranks: breakpoint() stops the ranks, the cell
returns showing where, ``%mpirun --pdb CMD`` drives pdb on all of them at once over the control
channel, and the World stays usable after ``c``, ``q`` or Ctrl-C."""
import time

import pytest

from mlp_magic.errors import MlpMagicError, RankFailure
from tests import kernel, worlds
from tests.integration.conftest import run, timed_run
from tests.timing import hang_bound

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def world(ip):
    run(ip, "%mpirun --stop")
    assert run(ip, "%%mpirun -np 4\npass") is None
    yield ip
    run(ip, "%mpirun --stop")


@pytest.fixture
def bp(world, capsys):
    """The 4-rank World, its output read per step; after the test no rank is left stopped."""
    capsys.readouterr()
    yield world
    if world.call(_paused_ranks):
        run(world, "%mpirun --pdb q")
    if world.call(_unfinished_ranks):   # in a collective with a rank that quit
        run(world, "%mpirun --restart")


def cell(ip, capsys, text: str):
    error = run(ip, text)
    return error, capsys.readouterr().out


# In the kernel (ip.call): what its World's busy job and live record say

def _busy_job():
    found = worlds.current_world()
    return getattr(found, "busy_job", None) if found is not None else None


def _paused_ranks() -> dict:
    return getattr(_busy_job(), "paused_ranks", dict)()


def _unfinished_ranks() -> list:
    job = _busy_job()
    return job.unfinished_ranks() if job is not None else []


def _states() -> list:
    return [row["state"] for row in worlds.current_world().live.record()["ranks"]]


_MISSED: set = set()   # in the kernel: the (requests, rank index) whose first PAUSED was dropped


def _hard_of_hearing(self, index, msg):
    from mlp_magic.client.waiting import PAUSED

    if msg.get("header", {}).get("msg_type") == PAUSED and (id(self), index) not in _MISSED:
        _MISSED.add((id(self), index))
        return
    _hard_of_hearing.heard(self, index, msg)


def _miss_every_first_stop() -> None:
    """In the kernel: its mlp_magic misses every rank's first word that it stopped."""
    from mlp_magic.client.waiting import Requests

    _MISSED.clear()
    _hard_of_hearing.heard = Requests._on_iopub
    Requests._on_iopub = _hard_of_hearing


def _hearing_again() -> int:
    """In the kernel: it hears again; how many first words it missed."""
    from mlp_magic.client.waiting import Requests

    Requests._on_iopub = getattr(_hard_of_hearing, "heard", Requests._on_iopub)
    return len(_MISSED)


def stopped_ranks() -> dict:
    return kernel.SESSION.call(_paused_ranks)


def states() -> list:
    return kernel.SESSION.call(_states)


ONE_LINE = "%%mpirun\nx = rank * 2\nbreakpoint()\ny = x + 1\nprint('after', y)\n"


def test_every_rank_stops_at_one_line_and_the_cell_shows_where(bp, capsys):
    error, out = cell(bp, capsys, ONE_LINE)
    assert error is None, out
    assert "ranks 0-3 (4) stopped at cell:3 <module>" in out, out
    assert "  -> 3  y = x + 1" in out and "     2  breakpoint()" in out, out
    assert "after {" not in out and "after 1" not in out
    assert sorted(stopped_ranks()) == [0, 1, 2, 3]
    assert states() == ["paused"] * 4
    refused, out = cell(bp, capsys, "%%mpirun\nprint('queued?')")
    assert isinstance(refused, MlpMagicError) and "\n" not in str(refused)
    assert "ranks 0-3 stopped at a breakpoint in an earlier cell: `%mpirun --pdb CMD`" in str(refused)
    error, out = cell(bp, capsys, "%mpirun --pdb")
    assert error is None and "ranks 0-3 (4) stopped at cell:3 <module>" in out, out
    error, out = cell(bp, capsys, "%mpirun --status")
    assert error is None and "\n4 ranks: 4 paused" in out, out
    assert "ranks 0-3 (4) stopped at cell:3 <module>" in out and "`%mpirun --pdb CMD`" in out, out


def test_p_of_a_value_that_differs_per_rank_is_folded(bp, capsys):
    assert cell(bp, capsys, ONE_LINE)[0] is None
    error, out = cell(bp, capsys, "%mpirun --pdb p x")
    assert error is None, out
    assert "(Pdb) p x" in out and "ranks 0-3 (4)" in out and "{0,2,4,6}" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb p x + 100 --ranks 1,3")
    assert error is None and "{102,106}" in out and "ranks 1,3 (2)" in out, out


def test_c_runs_to_the_end_shows_what_followed_and_the_world_goes_on(bp, capsys):
    assert cell(bp, capsys, ONE_LINE)[0] is None
    error, out = cell(bp, capsys, "%mpirun --pdb c")
    assert error is None, out
    assert "after {1,3,5,7}" in out, out
    assert states() == ["idle"] * 4
    error, out = cell(bp, capsys, "%%mpirun -o later\nprint('later', x, y)")
    assert error is None, out
    assert [r.stdout for r in bp.user_ns["later"]] == [f"later {2 * r} {2 * r + 1}\n" for r in range(4)]


TWO_LINES = """%%mpirun
def work(v):
    w = v * 3
    return w + 1

if rank % 2:
    breakpoint()
    odd = work(rank)
else:
    breakpoint()
    even = work(rank)
print('done')
"""


def test_ranks_stopped_at_two_lines_are_grouped_apart_and_n_s_step_across_a_call(bp, capsys):
    error, out = cell(bp, capsys, TWO_LINES)
    assert error is None, out
    assert "ranks 1,3 (2) stopped at cell:7 <module>" in out, out
    assert "ranks 0,2 (2) stopped at cell:10 <module>" in out, out
    # s steps into the function: every rank now at its call, then at its lines
    error, out = cell(bp, capsys, "%mpirun --pdb s")
    assert error is None and "ranks 0-3 (4) stopped at cell:1 work" in out and "--Call--" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb n")
    assert error is None and "ranks 0-3 (4) stopped at cell:2 work" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb n")
    assert error is None and "ranks 0-3 (4) stopped at cell:3 work" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb p w")
    assert error is None and "{0,3,6,9}" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb up")
    assert error is None, out
    error, out = cell(bp, capsys, "%mpirun --pdb")
    assert "ranks 1,3 (2) stopped at cell:7 <module>" in out, out
    assert "ranks 0,2 (2) stopped at cell:10 <module>" in out, out
    # n over the rest: back in the cell, past the call
    assert cell(bp, capsys, "%mpirun --pdb down")[0] is None
    error, out = cell(bp, capsys, "%mpirun --pdb r")
    assert error is None, out
    error, out = cell(bp, capsys, "%mpirun --pdb n")
    assert error is None and "ranks 0-3 (4) stopped at cell:11 <module>" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb c")
    assert error is None and "done" in out, out


def test_a_conditional_breakpoint_stops_one_rank_while_the_others_finish(bp, capsys):
    error, out = cell(bp, capsys, "%%mpirun\nimport mlp_magic\nprint('before', rank)\n"
                                  "mlp_magic.breakpoint(ranks=2, when=rank > 1)\nprint('after', rank)")
    assert error is None, out
    assert "rank 2 stopped at cell:4 <module>" in out, out
    assert "ranks 0-1,3 (3) finished" in out, out
    assert sorted(stopped_ranks()) == [2]
    assert states() == ["idle", "idle", "paused", "idle"]
    error, out = cell(bp, capsys, "%mpirun --pdb c")
    assert error is None and "after 2" in out and "after 0" not in out, out


def test_q_ends_the_debugging_with_one_line_and_the_world_stays_usable(bp, capsys):
    assert cell(bp, capsys, ONE_LINE)[0] is None
    error, out = cell(bp, capsys, "%mpirun --pdb q")
    assert error is None, out
    assert "quit at the debugger" in out and "World is still usable" in out, out
    assert "BdbQuit" not in out and "Traceback" not in out, out
    assert states() == ["idle"] * 4
    error, out = cell(bp, capsys, "%%mpirun -o next\nprint(rank)")
    assert error is None and [r.stdout for r in bp.user_ns["next"]] == [f"{r}\n" for r in range(4)]


def test_ctrl_c_while_ranks_are_stopped_ends_their_cells(bp, capsys):
    """Ranks 1-3 stopped, rank 0 still running (and writing, so the cell waits on): Ctrl-C ends
    every rank's cell, the stopped ones with "quit at the debugger"."""
    timer = bp.interrupt_after(2.0)   # the stop button
    error, elapsed = timed_run(bp, "%%mpirun -o ended\nimport time\nif rank == 0:\n"
                                   "    for _ in range(120):\n"
                                   "        print('.', flush=True); time.sleep(0.3)\n"
                                   "else:\n    breakpoint()\n    print('not reached')")
    timer.join()
    out = capsys.readouterr().out
    assert elapsed < hang_bound(2.0 + 2.0), elapsed
    ended = bp.user_ns["ended"]
    assert [r.status for r in ended] == ["interrupted", "quit", "quit", "quit"], out
    assert "not reached" not in out
    assert [ended[r].error for r in (1, 2, 3)] == ["quit at the debugger\n"] * 3
    assert run(bp, "%%mpirun -o next\nprint(rank)") is None


def test_a_block_of_python_runs_in_every_stopped_frame_and_changes_its_locals(bp, capsys):
    error, out = cell(bp, capsys, "%%mpirun\ndef f(a):\n    b = a + 1\n    breakpoint()\n"
                                  "    return b\nresult = f(rank)\nprint('result', result)")
    assert error is None and "ranks 0-3 (4) stopped at cell:4 f" in out, out
    error, out = cell(bp, capsys, "%%mpirun --pdb\nb = b * 100\nprint('b is', b)")
    assert error is None and "b is {100,200,300,400}" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb c")
    assert error is None and "result {100,200,300,400}" in out, out


def test_a_pdb_error_on_one_rank_is_shown_under_that_rank_only(bp, capsys):
    assert cell(bp, capsys, "%%mpirun\nif rank != 3:\n    z = 5\nbreakpoint()\npass")[0] is None
    error, out = cell(bp, capsys, "%mpirun --pdb p z")
    assert error is None, out
    assert "ranks 0-2 (3)" in out and "\n5\n" in out, out
    assert "rank 3" in out and "NameError: name 'z' is not defined" in out, out
    assert sorted(stopped_ranks()) == [0, 1, 2, 3]


def test_a_breakpoint_inside_a_script_stops_there(bp, capsys, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import sys\nloss = 1.0 / (1 + int(sys.argv[1]))\nbreakpoint()\n"
                      "print('loss', loss)\n")
    error, out = cell(bp, capsys, f"%mpirun {script} 3")
    assert error is None, out
    assert f"ranks 0-3 (4) stopped at {script}:4 <module>" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb p loss")
    assert error is None and "0.25" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb c")
    assert error is None and "loss 0.25" in out, out


def test_compare_evaluates_in_the_stopped_frames(bp, capsys):
    assert cell(bp, capsys, "%%mpirun\ndef g():\n    inner = [rank % 2, 7]\n    breakpoint()\n"
                            "    return inner\ng()")[0] is None
    error, out = cell(bp, capsys, "%mpirun --compare inner")
    assert error is None, out
    assert "ranks 0,2" in out and "ranks 1,3" in out, out


def test_bad_input_is_one_line_each(bp, capsys):
    error, _ = cell(bp, capsys, "%mpirun --pdb p 1")
    assert isinstance(error, MlpMagicError) and "no rank is stopped at a breakpoint" in str(error)
    assert cell(bp, capsys, ONE_LINE)[0] is None
    for line, expected in (("%mpirun --pdb p 1 --ranks 9", "--ranks"),
                           ("%mpirun --pdb interact", "'interact' cannot be sent to the ranks")):
        error, out = cell(bp, capsys, line)
        assert isinstance(error, MlpMagicError) and "\n" not in str(error), (line, error, out)
        assert expected in str(error), (line, error)
    assert sorted(stopped_ranks()) == [0, 1, 2, 3]   # nothing changed


def test_an_empty_command_is_one_line(bp, capsys):
    assert cell(bp, capsys, ONE_LINE)[0] is None
    for line in ("%mpirun --pdb ''", "%mpirun --pdb ;;"):
        error, out = cell(bp, capsys, line)
        assert isinstance(error, MlpMagicError) and "the command is empty" in str(error), (line, error)
    error, out = cell(bp, capsys, "%%mpirun --pdb p x\nx = 1")
    assert isinstance(error, MlpMagicError) and "not both" in str(error), error
    assert sorted(stopped_ranks()) == [0, 1, 2, 3]


def test_list_args_and_until(bp, capsys):
    assert cell(bp, capsys, "%%mpirun\ndef f(a, b=2):\n    breakpoint()\n    for i in range(3):\n"
                            "        a += i\n    return a\nf(rank)")[0] is None
    error, out = cell(bp, capsys, "%mpirun --pdb args")
    assert error is None and "a = {rank}" in out and "b = 2" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb list")
    assert error is None and "for i in range(3):" in out and "->" in out, out
    assert cell(bp, capsys, "%mpirun --pdb n")[0] is None   # at the loop's next line
    error, out = cell(bp, capsys, "%mpirun --pdb unt 5")
    assert error is None and "ranks 0-3 (4) stopped at cell:5 f" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb p a")
    assert error is None and "{3,4,5,6}" in out, out


def test_a_step_into_a_collective_names_the_ranks_still_in_it(bp, capsys):
    assert cell(bp, capsys, "%%mpirun\nbreakpoint()\ncomm.Barrier()\nprint('through')")[0] is None
    # ranks 0-2 step into the barrier, which waits for rank 3, still stopped: once they are
    # quiet a moment, the step returns naming them
    error, elapsed = timed_run(bp, "%mpirun --pdb n --ranks 0-2")
    out = capsys.readouterr().out
    assert error is None, out
    assert elapsed < hang_bound(2.0 + 2.0), elapsed
    assert "rank 3 stopped at cell:2 <module>" in out and "ranks 0-2 (3) still running" in out, out
    assert states() == ["busy", "busy", "busy", "paused"]
    error, out = cell(bp, capsys, "%mpirun --pdb n --ranks 3")
    assert error is None and "ranks 0-3 (4) stopped at cell:3 <module>" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb c")
    assert error is None and "through" in out, out


def test_a_timeout_on_c_interrupts_as_a_cell_timeout_does(bp, capsys):
    assert cell(bp, capsys, "%%mpirun -o slow\nimport time\nbreakpoint()\ntime.sleep(60)\nprint('late')")[0] \
        is None
    error, elapsed = timed_run(bp, "%mpirun --pdb c --timeout 2")
    out = capsys.readouterr().out
    assert elapsed < hang_bound(2.0 + 2.0), elapsed
    assert "timed out" in out and "late" not in out, out
    assert run(bp, "%%mpirun -o next\nprint(rank)") is None


def test_restart_while_ranks_are_stopped_starts_a_new_world(bp, capsys):
    assert cell(bp, capsys, ONE_LINE)[0] is None
    assert run(bp, "%mpirun --restart") is None
    error, out = cell(bp, capsys, "%%mpirun -o fresh\nprint('x' in dir())")
    assert error is None and [r.stdout for r in bp.user_ns["fresh"]] == ["False\n"] * 4, out


def test_break_at_a_line_of_a_file_with_a_condition_stops_the_ranks_there(bp, capsys, tmp_path):
    module = tmp_path / "steps.py"
    module.write_text("def step(i):\n    loss = 10.0 / (i + 1)\n    return loss\n")
    assert run(bp, f"%%mpirun\nimport sys\nsys.path.insert(0, {str(tmp_path)!r})\nimport steps") is None
    error, out = cell(bp, capsys, f"%mpirun --break {module}:3 --ranks 1-2 --if 'loss < 4'")
    assert error is None and f"breakpoint at {module}:3 on ranks 1-2 where loss < 4" in out, out
    error, out = cell(bp, capsys, "%%mpirun\nfor i in range(5):\n    steps.step(i + rank)\n"
                                  "print('done', rank)")
    assert error is None, out
    # step(i) gets i + rank: rank 1 stops at its second step, rank 2 at its first, both at i = 2
    assert "ranks 1-2 (2) stopped at" in out and "steps.py:3 step" in out, out
    assert "ranks 0,3 (2) finished" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb p i, round(loss, 2)")
    assert "ranks 1-2 (2)" in out and "(2, 3.33)" in out, out   # in the step's frame
    error, out = cell(bp, capsys, "%mpirun --pdb c")   # stops again at the next step: the break stays
    assert error is None and "ranks 1-2 (2) stopped at" in out, out
    error, out = cell(bp, capsys, "%mpirun --pdb p i")
    assert "\n3\n" in out, out
    assert run(bp, "%mpirun --pdb q") is None
    error, out = cell(bp, capsys, "%mpirun --break clear")
    assert error is None and "cleared 1 breakpoint(s)" in out, out
    error, out = cell(bp, capsys, "%%mpirun\nsteps.step(3)\nprint('free')")
    assert error is None and "stopped" not in out and "free" in out, out


def test_break_in_a_cell_line(bp, capsys):
    assert run(bp, "%mpirun --break cell:2") is None
    try:
        error, out = cell(bp, capsys, "%%mpirun\na = rank\nb = a * 3\nprint(b)")
        assert error is None and "ranks 0-3 (4) stopped at cell:2 <module>" in out, out
        assert run(bp, "%mpirun --pdb c") is None
    finally:
        run(bp, "%mpirun --break clear")


@pytest.mark.parametrize("line, expected", [
    ("%mpirun --break nowhere.py:3", "no such file on this rank"),
    ("%mpirun --break x.py", "expected FILE:LINE"),
    ("%mpirun --break cell:2 --if 'a >'", "--if 'a >'"),
    ("%mpirun --break clear --ranks 1", "takes no --ranks or --if"),
])
def test_bad_break_lines_are_one_line_each(bp, capsys, line, expected):
    error, out = cell(bp, capsys, line)
    assert isinstance(error, MlpMagicError) and "\n" not in str(error), (error, out)
    assert expected in str(error), error
    error, out = cell(bp, capsys, "%mpirun --break clear")
    assert "cleared 0 breakpoint(s)" in out, out


def test_unblock_and_stacks_while_stopped_leave_the_process_group_alone(bp, capsys):
    """Stopped ranks wait in pdb, not in a collective: --unblock says so and changes nothing (it
    used to close their gloo connections, and the next collective failed); --stacks shows pdb."""
    assert run(bp, "%%mpirun\nimport torch, torch.distributed as dist\n"
                   "dist.init_process_group('gloo')") is None
    try:
        assert cell(bp, capsys, "%%mpirun\nbreakpoint()\npass")[0] is None
        error, out = cell(bp, capsys, "%mpirun --stacks")
        assert error is None and "readline" in out, out
        error, out = cell(bp, capsys, "%mpirun --unblock")
        assert error is None, out
        assert "nothing to unblock: ranks 0-3 stopped at a breakpoint" in out, out
        assert sorted(stopped_ranks()) == [0, 1, 2, 3]
        assert cell(bp, capsys, "%mpirun --pdb c")[0] is None
        error, out = cell(bp, capsys, "%%mpirun\nt = torch.ones(1)\ndist.all_reduce(t)\nprint(t.item())")
        assert error is None and "4.0" in out, out
    finally:
        run(bp, "%%mpirun\ndist.destroy_process_group()")


def test_a_stop_the_kernel_did_not_hear_is_said_again(bp, capsys):
    """A rank stopping at once can say so before the kernel listens to the cell's messages (a
    cell then waited forever, now and then): it says it again. Here the kernel misses every
    rank's first word on purpose."""
    bp.call(_miss_every_first_stop)
    try:
        error, elapsed = timed_run(bp, "%%mpirun\nbreakpoint()\npass")
    finally:
        missed = bp.call(_hearing_again)
    assert error is None and elapsed < hang_bound(3.0), elapsed
    assert missed == 4 and sorted(stopped_ranks()) == [0, 1, 2, 3]
    assert run(bp, "%mpirun --pdb c") is None
    capsys.readouterr()


def test_one_rank_stopped_while_the_others_wait_for_it_in_a_collective(bp, capsys):
    """The others cannot stop (they wait in the barrier for the stopped rank): the cell shows the
    stopped rank once they have been quiet a moment, names the others, and `c` lets all go on."""
    error, elapsed = timed_run(bp, "%%mpirun -o through\nimport mlp_magic\nmlp_magic.breakpoint(ranks=2)\n"
                                   "comm.Barrier()\nprint('through', rank)")
    out = capsys.readouterr().out
    assert error is None and elapsed < hang_bound(2.0 + 3.0), (elapsed, out)
    assert "rank 2 stopped at cell:3 <module>" in out and "ranks 0-1,3 (3) still running" in out, out
    assert states() == ["busy", "busy", "paused", "busy"]
    error, out = cell(bp, capsys, "%mpirun --pdb c")
    assert error is None and "through {rank}" in out, out
    assert [r.stdout for r in bp.user_ns["through"]] == [f"through {r}\n" for r in range(4)]   # -o: the end


def test_a_rank_that_fails_after_c_fails_the_command_and_o_keeps_the_end(bp, capsys):
    assert cell(bp, capsys, "%%mpirun -o ended\nbreakpoint()\n1 / (rank - 1)")[0] is None
    error, out = cell(bp, capsys, "%mpirun --pdb c")
    assert isinstance(error, RankFailure) and "error on ranks 1 (1 of 4)" in str(error), (error, out)
    assert [r.status for r in bp.user_ns["ended"]] == ["ok", "error", "ok", "ok"]


def test_a_slow_command_is_named_and_its_answer_comes_later(bp, capsys):
    assert cell(bp, capsys, ONE_LINE)[0] is None
    error, elapsed = timed_run(bp, "%mpirun --pdb p __import__('time').sleep(4) or 'slept'")
    out = capsys.readouterr().out
    assert error is None and elapsed < hang_bound(2.0 + 1.0), elapsed
    assert "still running the command after 2 s" in out, out
    time.sleep(3)
    error, out = cell(bp, capsys, "%mpirun --pdb")
    assert "answers that came late" in out and "'slept'" in out, out


def test_a_breakpoint_in_another_thread_does_not_stop_the_rank(bp, capsys):
    error, out = cell(bp, capsys, "%%mpirun\nimport threading\nt = threading.Thread(target=breakpoint)\n"
                                  "t.start(); t.join()\nprint('main done')")
    assert error is None and "main done" in out and "stops in its main thread only" in out, out
    assert cell(bp, capsys, "%%mpirun\nprint('next')")[0] is None
