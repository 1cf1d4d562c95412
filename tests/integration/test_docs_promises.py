"""What the guides promise, in the kernel users run (issue 49): each finding of a new user who
followed the docs, as a test that failed on the code they met."""
import json
import os
import re

import pytest

from tests.kernel import Kernel


@pytest.fixture(scope="module")
def kernel():
    started = Kernel(echo=False)
    yield started
    started.shutdown()


def test_allrun_json_in_the_magic_as_the_install_guide_lists_it(kernel):
    """The guide lists `--json` for `%allrun`; the magic refused it ("unknown option")."""
    run = kernel.run_cell("%allrun --json echo hello")
    assert run.success, run.shown
    results = json.loads(run.stdout)
    assert [(r["host"], r["status"], r["stdout"]) for r in results] == [("localhost", "ok", "hello\n")]
    assert not run.of_type("display_data")   # the data alone, no grouped summary around it


PUSHED = """def triple(v):
    return 3 * v

scale = 5
cfg = {"lr": 0.1, "fn": triple, "scaled": lambda v: scale * v}
"""


def test_push_moves_notebook_functions_lambdas_and_closures_as_the_guide_says(kernel):
    """The guide: --push moves what view.push moves, "functions defined in the notebook included";
    a dict holding a top-level def failed on every rank (AttributeError: Can't get attribute
    'triple' on <module '__main__'>) and one holding a lambda with a PicklingError."""
    assert kernel.run_cell(PUSHED).success
    assert kernel.run_cell("%%mpirun -np 2\npass").success
    pushed = kernel.run_cell("%mpirun --push cfg")
    assert pushed.success, pushed.shown
    assert "pushed cfg (dict, " in pushed.stdout and "to ranks 0-1" in pushed.stdout
    run = kernel.run_cell("%%mpirun -o used\nprint(cfg['fn'](rank + 1), cfg['scaled'](rank), cfg['lr'])")
    assert run.success, run.shown
    assert [r.stdout for r in kernel.user_ns["used"]] == ["3 0 0.1\n", "6 5 0.1\n"]


def test_a_value_that_cannot_be_pickled_is_refused_naming_its_type_size_and_reason(kernel):
    assert kernel.run_cell("import threading\nheld = {'lock': threading.Lock()}").success
    refused = kernel.run_cell("%mpirun --push held")
    message = str(refused.error_in_exec)
    assert message.startswith("%mpirun --push held: a dict of "), message
    assert "(its own size) cannot be pickled: TypeError: cannot pickle '_thread.lock' object" in message
    assert "\n" not in message
    kernel.run_cell("%mpirun --stop")


def test_allrun_pip_is_the_ranks_python_when_jupyter_starts_a_venvs_kernel_by_its_path(kernel, tmp_path):
    """Jupyter often starts a venv's kernel by its path, without the venv's bin/ on PATH: %allrun
    pip then named another pip than the ranks' Python's (the guide: "installs where the ranks
    import from")."""
    import os
    import sys

    bare_path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                if os.path.realpath(p) != os.path.realpath(os.path.dirname(sys.executable)))
    # another Python's pip first on that PATH (a system pip, a pyenv shim): read, never run
    (tmp_path / "pip").write_text("#!/usr/bin/python3\nimport sys\n")
    (tmp_path / "pip").chmod(0o755)
    usual = kernel.run_cell("%mlp_doctor --json")   # the ranks' own pip first on PATH: nothing said
    assert [f for f in json.loads(usual.stdout)["findings"] if f["title"] == "pip on PATH"] == []
    bare = Kernel(env={"PATH": os.pathsep.join([str(tmp_path), bare_path])}, echo=False)
    try:
        ranks_python = bare.eval("__import__('sys').executable")
        folder = os.path.dirname(ranks_python)
        run = bare.run_cell("%allrun -o found pip --version; pip3 --version; python -m pip --version")
        assert run.success, run.shown
        lines = bare.user_ns["found"].results[0].stdout.splitlines()
        prefix = os.path.dirname(folder) + os.sep   # the venv
        assert len(lines) == 3 and all(f" from {prefix}" in line for line in lines), (prefix, lines)
        # the doctor names the PATH whose pip is another Python's (it said nothing)
        doctor = bare.run_cell("%mlp_doctor --json")
        [finding] = [f for f in json.loads(doctor.stdout)["findings"] if f["title"] == "pip on PATH"]
        assert finding["severity"] == "warning" and ranks_python in finding["detail"], finding
        assert f"is {tmp_path / 'pip'} (for /usr/bin/python3)" in finding["detail"], finding
        assert finding["fix"].startswith("use %allrun pip install (or %pip install)"), finding
    finally:
        bare.shutdown()


def test_the_footer_of_a_timed_out_cell_says_how_long_it_ran_with_every_rank_stuck_in_c(kernel):
    """With every rank blocked in a C call past --timeout, the footer said `4 ranks | -` (or
    `0.00 s`) for a cell that ran for seconds: the ranks that did not finish have no time of
    their own. It is the time they had run when the cell ended."""
    assert kernel.run_cell("%%mpirun -np 2\nfrom mpi4py import MPI\nimport numpy").success
    run = kernel.run_cell("%%mpirun --timeout 2\nMPI.COMM_WORLD.Recv(numpy.zeros(1), source=1 - rank)")
    try:
        took = re.findall(r"^2 ranks \| (.*) \| logs: ", run.shown, re.M)
        assert len(took) == 1 and took[0].endswith(" s"), run.shown
        assert 2.0 <= float(took[0].removesuffix(" s")) < 30, took
    finally:
        kernel.run_cell("%mpirun --stop")


@pytest.mark.parametrize("after_s", [0.3, 0.9])
def test_an_interrupt_while_the_world_starts_is_one_line_and_leaves_nothing_running(kernel, after_s):
    """The stop button while a World started showed a bare KeyboardInterrupt with the traceback of
    wherever the start was waiting (the controller's file, the ranks' bootstrap)."""
    import psutil

    kernel.run_cell("%mpirun --stop")
    kernel.interrupt_after(after_s)
    run = kernel.run_cell("%%mpirun -np 2\nprint('started')")
    error = run.error_in_exec
    assert error is not None and type(error).__name__ == "MlpMagicError", run.shown
    assert str(error).startswith("the start of a World of 2 ranks was interrupted after "), error
    assert "Traceback" not in run.shown and "KeyboardInterrupt" not in run.shown, run.shown
    left = psutil.Process(kernel.pid).children(recursive=True)
    assert psutil.wait_procs(left, timeout=10)[1] == [], left
    assert "no World running" in kernel.run_cell("%mpirun --status").stdout


def test_making_the_default_process_group_again_is_one_line_saying_what_to_do(kernel):
    """Re-running the README's `dist.init_process_group("gloo")` cell failed on every rank with
    torch's full traceback ("trying to initialize the default process group twice")."""
    make = "%%mpirun -np 2\nimport torch, torch.distributed as dist\ndist.init_process_group('gloo')"
    assert kernel.run_cell(make).success
    try:
        again = kernel.run_cell(make)
        assert type(again.error_in_exec).__name__ == "RankFailure", again.shown
        assert "Traceback" not in again.shown and "File " not in again.shown, again.shown
        said = [line for line in again.shown.splitlines() if "process group" in line]
        assert said == ["ValueError: torch.distributed's default process group exists already (an "
                        "earlier cell made it): use it as it is; `if not dist.is_initialized():` before "
                        "`init_process_group` makes the cell safe to run again"], again.shown
        # what it says works (destroying and making it again on the same MASTER_PORT can hang:
        # a rank may reach the old store before rank 0 has made the new one)
        guarded = kernel.run_cell("%%mpirun -o summed\nif not dist.is_initialized():\n"
                                  "    dist.init_process_group('gloo')\n"
                                  "t = torch.ones(1)\ndist.all_reduce(t)\nprint(int(t))")
        assert guarded.success and {r.stdout for r in kernel.user_ns["summed"]} == {"2\n"}, guarded.shown
    finally:
        kernel.run_cell("%mpirun --stop")


def test_stacks_of_an_idle_world_say_idle_and_a_scripts_tree_starts_at_the_script(kernel, tmp_path):
    """%mlp_stacks on an idle World printed 11 lines of ipyparallel's event loop where `%mpirun
    --stacks` says idle; a script's tree showed mlp_magic's own `script.py:91 run_script`."""
    assert kernel.run_cell("%%mpirun -np 2\npass").success
    try:
        idle = kernel.run_cell("%mlp_stacks")
        assert "summary: ranks 0-1 (2) on localhost: idle: not running a cell" in idle.shown, idle.shown
        assert "IPEngine" not in idle.stdout and "run_forever" not in idle.shown, idle.shown
        script = tmp_path / "hang.py"
        script.write_text("import time\n\ndef step():\n    time.sleep(60)\n\nstep()\n")
        hung = kernel.run_cell(f"%mpirun --timeout 2 {script}")
        assert "summary: ranks 0-1 (2) on localhost: hang.py:6 <module> > hang.py:4 step" in hung.shown, \
            hung.shown
        assert "run_script" not in hung.shown and "cell:" not in hung.shown, hung.shown
    finally:
        kernel.run_cell("%mpirun --stop")


def _record_second_rounds() -> None:
    """In the kernel: each second round of an interrupt recorded as (ranks running before the
    first, before the second, the grace, the wait)."""
    from mlp_magic.client import job
    from mlp_magic.world.pure import budget

    seen = []

    def recorded(grace, before, after, ranks_per_cpu):
        waited = budget.second_round_grace(grace, before, after, ranks_per_cpu)
        seen.append((before, after, grace, waited, ranks_per_cpu))
        return waited
    job.second_round_grace, job.seen_second_rounds = recorded, seen


def _second_rounds() -> list:
    from mlp_magic.client import job
    from mlp_magic.world.pure import budget

    job.second_round_grace = budget.second_round_grace
    return job.__dict__.pop("seen_second_rounds")


@pytest.mark.alone   # times the two rounds of the interrupt
def test_the_stop_button_on_a_stuck_gloo_collective_waits_one_grace_and_a_short_second_round(kernel):
    """The stop button on a gloo all_reduce that a rank skipped returned 2.4 s after the
    interrupt (two full graces; the guide: "within about a second"). Where the first round stops
    no rank, the second is short; where it stops some (a slow host), the others get all of it."""
    import time

    assert kernel.run_cell("%%mpirun -np 2\nimport torch, torch.distributed as dist\nfrom mpi4py import MPI\n"
                           "import numpy, time\ndist.init_process_group('gloo')").success
    kernel.call(_record_second_rounds)
    try:
        sent = kernel.send("%%mpirun\nif rank == 0:\n    dist.all_reduce(torch.ones(1))")
        time.sleep(2)
        interrupted = time.monotonic()
        kernel.interrupt()
        stuck = kernel.wait(sent)
        print(f"returned {time.monotonic() - interrupted:.2f} s after the interrupt")
        assert "rank 0 did not stop on SIGINT (blocked in a C call?)" in stuck.shown, stuck.shown
        assert kernel.run_cell("%mpirun --unblock").success
        sent = kernel.send("%%mpirun\nif rank == 0:\n    time.sleep(60)\n"
                           "else:\n    MPI.COMM_WORLD.Recv(numpy.zeros(1), source=0)")
        time.sleep(2)
        kernel.interrupt()
        slow = kernel.wait(sent)
        assert "rank 1 did not stop on SIGINT" in slow.shown, slow.shown
        rounds = kernel.call(_second_rounds)
        assert [(before, after) for before, after, *_ in rounds] == [(1, 1), (2, 1)], rounds
        (_, _, grace, waited, ranks_per_cpu), (_, _, grace_2, waited_2, _) = rounds
        # short on cores of their own; on a machine where the 2 ranks share a core, all of it
        assert waited == (0.3 if ranks_per_cpu <= 1 else grace) and waited_2 == grace_2, rounds
    finally:
        kernel.run_cell("%mpirun --stop")


# ~6 s each here; the finding came once in about ten runs of a new user's notebook: the suite
# repeats it 3 times, MLP_UNBLOCK_REPEATS=30 shows it gone (0.9**30: a 4% chance to miss it)
REPEATS = int(os.environ.get("MLP_UNBLOCK_REPEATS", "3"))


def test_unblocking_a_gloo_only_hang_never_revokes_mpi_in_the_users_sequence(kernel):
    """Finding 6: a Python loop interrupted, then a gloo all_reduce that rank 3 skipped stopped
    from the stop button, a refused cell, then `%mpirun --unblock`: once in about ten runs the
    unblock also revoked MPI.COMM_WORLD. The second ask of an unblock takes the first's way
    (tests/unit/unblock/rank/test_repeated_ask); here, the whole sequence, repeated."""
    import time

    assert kernel.run_cell("%%mpirun -np 4\nimport torch, torch.distributed as dist\n"
                           "from mpi4py import MPI\ndist.init_process_group('gloo')").success
    try:
        for _ in range(REPEATS):
            for code, after_s in (("x = 0\nfor i in range(10**10):\n    x += i", 1.0),
                                  ("if rank != 3:\n    dist.all_reduce(torch.ones(1))", 1.5)):
                sent = kernel.send(f"%%mpirun\n{code}")
                time.sleep(after_s)
                kernel.interrupt()
                kernel.wait(sent)
            refused = kernel.run_cell("%%mpirun\nprint('runs?')")
            assert "ranks 0-2 are still running an earlier cell" in refused.shown, refused.shown
            unblocked = kernel.run_cell("%mpirun --unblock")
            assert "ranks 0-2 came free in " in unblocked.shown, unblocked.shown
            assert "revoked" not in unblocked.shown, unblocked.shown
            both = kernel.run_cell("%%mpirun -o both\nMPI.COMM_WORLD.Barrier()\nt = torch.ones(1)\n"
                                   "dist.all_reduce(t)\nprint(MPI.COMM_WORLD.Get_size(), int(t))")
            assert both.success and {r.stdout for r in kernel.user_ns["both"]} == {"4 4\n"}, both.shown
    finally:
        kernel.run_cell("%mpirun --stop")
