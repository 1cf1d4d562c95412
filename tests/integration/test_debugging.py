"""Debugging on real ranks: sys.argv in cells, %mpirun script.py, post-mortem and --where."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from mlp_magic.errors import MlpMagicError, RankFailure
from tests.timing import hang_bound

from tests.integration.conftest import run, timed_run

pytestmark = pytest.mark.timeout(240)

NESTED_FAILURE = """%%mpirun -np 4
def outer(x):
    y = x * 10
    return inner([y, y + 1])

def inner(values):
    total = sum(values)
    if rank % 2:
        raise ValueError(f"odd rank, total {total}")
    return total

outer(rank)
"""


def outputs(ip, name):
    return [r.stdout for r in ip.user_ns[name]]


def error_line(error) -> str:
    assert isinstance(error, MlpMagicError), error
    assert "\n" not in str(error)
    return str(error)


# ---------------------------------------------------------------- sys.argv in a plain cell

def test_a_cell_sees_argv_as_python_c_and_argparse_gives_its_defaults(ip):
    error = run(ip, """%%mpirun -np 4 -o argv
import argparse, sys
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
print(sys.argv, parser.parse_args().lr)
""")
    assert error is None
    assert outputs(ip, "argv") == ["['-c'] 0.1\n"] * 4


def test_sys_exit_in_a_cell_is_read_as_python_reads_it(ip):
    """As under ``mpiexec python -c``: sys.exit(0) or sys.exit() ends the cell well, silently,
    and the code after it does not run; another status fails that rank, in one line. (Before:
    every rank failed with "SystemExit: 0" and IPython's "To exit: use 'exit'..." warning.)"""
    error = run(ip, "%%mpirun -np 4 -o ended\nimport sys\nprint('before')\n"
                    "sys.exit(3 if rank == 2 else None if rank == 1 else 0)\nprint('after')")
    assert isinstance(error, RankFailure) and "error on ranks 2 (1 of 4)" in str(error), error
    ended = ip.user_ns["ended"]
    assert [r.status for r in ended] == ["ok", "ok", "error", "ok"]
    assert outputs(ip, "ended") == ["before\n"] * 4
    assert all("To exit" not in r.stderr and "SystemExit" not in r.stderr for r in ended)
    assert ended[2].error.strip() == "SystemExit: 3"   # one line, not IPython's "An exception has..."
    assert run(ip, "%%mpirun -o fine\nimport sys\nsys.exit(0)") is None   # every rank: no failure
    assert isinstance(run(ip, "%%mpirun -o said\nimport sys\nsys.exit('cannot go on')"), RankFailure)
    said = ip.user_ns["said"]
    assert said[0].error.strip() == "SystemExit: 1" and said[0].stderr == "cannot go on\n"   # as Python


def test_input_on_a_rank_is_the_end_of_an_empty_stdin_as_under_mpiexec(ip):
    """It was ipykernel's StdinNotImplementedError and all its frames."""
    assert isinstance(run(ip, "%%mpirun -o asked\nanswer = input('lr? ')"), RankFailure)
    asked = ip.user_ns["asked"]
    assert all(r.stdout == "lr? " for r in asked)
    error = asked[0].error
    assert error.strip().splitlines()[-1] == ("EOFError: EOF when reading a line: a rank has no stdin "
                                              "(%mpirun --push NAME sends it a value)")
    assert "ipykernel" not in error and "StdinNotImplemented" not in error and "answer = input" in error


def test_mpi4py_helloworld_runs_in_a_cell(ip):
    error = run(ip, "%%mpirun -np 4 -o hello\nfrom mpi4py import MPI, bench\n"
                    "bench.helloworld(MPI.COMM_WORLD, verbose=False)\nprint('said hello')")
    assert error is None
    assert outputs(ip, "hello") == ["said hello\n"] * 4


# ---------------------------------------------------------------- %mpirun script.py

TRAIN = """
import argparse, json, sys
from neighbour import FACTOR        # the script's folder is on sys.path

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--timeout", type=int, default=0)
args = parser.parse_args()
steps_done = int(args.lr * FACTOR)

def main():
    print(json.dumps({"lr": args.lr, "timeout": args.timeout, "name": __name__, "argv": sys.argv,
                      "rank": int(__import__("os").environ["RANK"]), "file": __file__}))

if __name__ == "__main__":
    main()
"""


def test_a_script_runs_on_every_rank_as_mpiexec_would(ip, tmp_path, monkeypatch):
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    (folder / "neighbour.py").write_text("FACTOR = 100\n")
    monkeypatch.chdir(tmp_path)     # a relative path is the notebook's, not the engines' folder
    error = run(ip, "%mpirun -np 4 -o trained job/train.py --lr 0.5 --timeout 3")
    assert error is None
    seen = [json.loads(text) for text in outputs(ip, "trained")]
    assert [s["rank"] for s in seen] == [0, 1, 2, 3]
    for s in seen:
        assert (s["lr"], s["timeout"], s["name"]) == (0.5, 3, "__main__")   # --timeout was the script's
        assert s["argv"] == ["job/train.py", "--lr", "0.5", "--timeout", "3"]
        assert s["file"] == str(folder / "train.py")
    # its globals stay for inspection; the next plain cell sees argv as before
    assert run(ip, "%%mpirun -o after\nprint(steps_done, args.lr, sys.argv, __name__)") is None
    assert outputs(ip, "after") == ["50 0.5 ['-c'] __main__\n"] * 4
    # a plain cell is `python -c` again: no __file__ (multiprocessing's spawn would re-run it), and
    # running the script again does not grow sys.path
    assert run(ip, "%mpirun job/train.py --lr 0.5") is None
    assert run(ip, "%%mpirun -o after\nimport sys\nprint('__file__' in dir(), sys.path.count("
                   f"{str(folder)!r}))") is None
    assert outputs(ip, "after") == ["False 1\n"] * 4


def test_script_exit_statuses(ip, tmp_path):
    script = tmp_path / "exits.py"
    script.write_text("import sys\nif rank == 2:\n    sys.exit(3)\nsys.exit(0)\n")
    error = run(ip, f"%mpirun -np 4 -o exits {script}")
    assert isinstance(error, RankFailure) and "error on ranks 2 (1 of 4)" in str(error)
    assert "exits.py exited with status 3" in ip.user_ns["exits"][2].error
    assert [r.status for r in ip.user_ns["exits"]] == ["ok", "ok", "error", "ok"]
    (tmp_path / "strict.py").write_text(TRAIN.replace("from neighbour import FACTOR", "FACTOR = 1"))
    error = run(ip, f"%mpirun -o strict {tmp_path / 'strict.py'} --bogus")
    assert isinstance(error, RankFailure)
    assert "unrecognized arguments: --bogus" in ip.user_ns["strict"][0].stderr
    # as Python: the script's own message, then one line, no traceback through argparse
    shown = ip.user_ns["strict"][0].error.strip()
    assert shown == f"ScriptExit: {tmp_path / 'strict.py'} exited with status 2"


def test_a_script_that_does_not_compile_is_one_syntax_error_as_python_shows_it(ip, tmp_path):
    """The file, the line, the caret: none of the frames that ran it, nor the generated call."""
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\nif x >\n    print(x)\n")
    assert isinstance(run(ip, f"%mpirun -np 2 -o broken {broken}"), RankFailure)
    expected = subprocess.run([sys.executable, str(broken)], capture_output=True, text=True).stderr
    shown = ip.user_ns["broken"][0].error
    assert shown.strip().splitlines() == expected.strip().splitlines()[-4:]   # python's, less its header
    assert "__import__" not in shown and "script.py" not in shown and str(broken) in shown
    assert isinstance(run(ip, "%mpirun -o passwd /etc/passwd"), RankFailure)
    assert ip.user_ns["passwd"][0].error.strip().splitlines()[-1].startswith("SyntaxError: ")


def test_a_missing_script_is_named_and_nothing_runs(ip, tmp_path, mlp_home):
    logs = os.path.join(mlp_home, "logs")
    before = set(os.listdir(logs)) if os.path.isdir(logs) else set()
    error = run(ip, f"%mpirun -np 4 {tmp_path}/nowhere.py --lr 1")
    assert error_line(error) == f"%mpirun: script {tmp_path}/nowhere.py: no such file; nothing was run"
    error = run(ip, f"%mpirun {tmp_path}")
    assert "is a folder, not a script" in error_line(error)
    assert "is a pipe or a device, not a script" in error_line(run(ip, "%mpirun /dev/zero"))
    assert (set(os.listdir(logs)) if os.path.isdir(logs) else set()) == before   # no cell ran


# ---------------------------------------------------------------- post-mortem

def test_post_mortem_reads_the_failed_frames_locals(ip):
    assert isinstance(run(ip, NESTED_FAILURE), RankFailure)
    assert run(ip, "%%mpirun --post-mortem -o frame0\nprint(values, total, rank)") is None
    assert [r.rank for r in ip.user_ns["frame0"]] == [1, 3]           # the failed ranks only
    assert outputs(ip, "frame0") == ["[10, 11] 21 1\n", "[30, 31] 61 3\n"]
    assert run(ip, "%%mpirun --post-mortem --frame 1 -o frame1\nprint(x, y, 'values' in dir())") is None
    assert outputs(ip, "frame1") == ["1 10 False\n", "3 30 False\n"]
    # the last expression's value is each rank's result, as in any cell
    assert run(ip, "%%mpirun --post-mortem --ranks 3 -o last\ntotal * 2") is None
    assert ip.user_ns["last"][3].displays[-1]["data"]["text/plain"] == "122"


def test_where_shows_each_failed_ranks_frames_and_locals(ip, capsys):
    assert isinstance(run(ip, NESTED_FAILURE), RankFailure)
    capsys.readouterr()
    assert run(ip, "%mpirun --where -o where") is None
    where = ip.user_ns["where"]
    assert [r.rank for r in where] == [1, 3]
    text = where[1].stdout
    assert "  [frame 0] cell, line 8, in inner" in text
    assert "          values: list = [10, 11]" in text and "          total: int = 21" in text
    assert "  [frame 1] cell, line 3, in outer" in text and "          y: int = 10" in text
    assert "  [frame 2] cell, line 11, in <module>" in text and "          rank: int = 1" in text
    assert "outer: function" not in text                       # a cell's top level: its values only
    assert text.rstrip().endswith("ValueError: odd rank, total 21")
    assert "total: int = 61" in where[3].stdout
    shown = capsys.readouterr().out
    assert "ranks 1,3 (2) on localhost" in shown, shown   # folded: the same frames, other numbers


def test_bad_post_mortem_requests_are_one_line(ip):
    assert isinstance(run(ip, NESTED_FAILURE), RankFailure)
    assert error_line(run(ip, "%%mpirun --post-mortem --frame 3\nx")) == (
        "%%mpirun --post-mortem: --frame 3 is out of range: ranks 1,3 have 3 frames of user code "
        "(--frame 0-2)")
    assert error_line(run(ip, "%%mpirun --post-mortem --ranks 0-1\nx")) == (
        "%%mpirun --post-mortem: rank 0 has no failure to inspect (with one: ranks 1,3)")
    assert "line 1 of the cell: " in error_line(run(ip, "%%mpirun --post-mortem\nprint(x y)"))
    assert error_line(run(ip, "%mpirun --post-mortem")).startswith("%mpirun: --post-mortem runs a cell")
    failed = run(ip, "%%mpirun --post-mortem -o oops\nundefined_name")
    assert isinstance(failed, RankFailure) and "NameError" in ip.user_ns["oops"][1].error
    # none of these replaced the failure kept on the ranks
    assert run(ip, "%%mpirun --post-mortem -o still\nprint(total)") is None
    assert outputs(ip, "still") == ["21\n", "61\n"]


def test_a_failure_is_kept_until_that_ranks_next_cell_succeeds(ip):
    assert isinstance(run(ip, NESTED_FAILURE), RankFailure)
    assert run(ip, "%%mpirun --ranks 0,3\npass") is None           # rank 3 moved on, rank 1 did not
    assert run(ip, "%%mpirun --post-mortem -o kept\nprint(total)") is None
    assert [r.rank for r in ip.user_ns["kept"]] == [1]
    assert run(ip, "%%mpirun\npass") is None
    assert error_line(run(ip, "%mpirun --where")) == (
        "%mpirun --where: no rank has a failure to inspect (a rank keeps its last failure until its next "
        "cell succeeds)")


def test_post_mortem_after_a_timeout_is_where_each_rank_was_interrupted(ip):
    cell = textwrap.dedent("""\
        %%mpirun -np 4 --timeout 3
        import time
        def wait_here(seconds):
            waited_for = seconds * rank
            time.sleep(seconds)
        if rank:
            wait_here(60)
        """)
    error = run(ip, cell)
    assert isinstance(error, RankFailure) and "timeout on ranks 1-3" in str(error)
    assert run(ip, "%%mpirun --post-mortem -o stopped\nprint(seconds, waited_for)") is None
    assert [r.rank for r in ip.user_ns["stopped"]] == [1, 2, 3]
    assert outputs(ip, "stopped") == ["60 60\n", "60 120\n", "60 180\n"]
    assert run(ip, "%mpirun --where --ranks 2 -o where") is None
    text = ip.user_ns["where"][2].stdout
    assert "  [frame 0] cell, line 4, in wait_here" in text and "time.sleep(seconds)" in text
    assert text.rstrip().endswith("KeyboardInterrupt (interrupted here)")


def test_post_mortem_in_a_failed_script(ip, tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("def step(batch):\n    loss = batch * 2\n    raise RuntimeError(f'nan at {loss}')\n\n"
                      "for batch in range(3):\n    if batch == rank:\n        step(batch)\n")
    assert isinstance(run(ip, f"%mpirun -np 4 {script}"), RankFailure)
    assert run(ip, "%%mpirun --post-mortem -o pm\nprint(loss)") is None
    assert outputs(ip, "pm") == ["0\n", "2\n", "4\n"]               # rank 3 never failed
    assert run(ip, "%mpirun --where --ranks 1 -o where") is None
    text = ip.user_ns["where"][1].stdout
    assert f"  [frame 0] {script}, line 3, in step" in text and "loss: int = 2" in text
    assert f"  [frame 1] {script}, line 7, in <module>" in text and "batch: int = 1" in text
    assert "mlp_magic" not in text and "frame 2" not in text        # our own frames are not the user's


def test_a_failed_cells_objects_are_freed_once_the_rank_moves_on(ip):
    """A CUDA out-of-memory's tensors must go once the next cell succeeds: not only our kept
    failure, Python's and IPython's last-exception references too."""
    assert run(ip, "%%mpirun -np 4\nimport gc, weakref\nclass Big: pass\nrefs = {}") is None
    failing = ("%%mpirun\ndef fill():\n    big = Big()\n    refs['big'] = weakref.ref(big)\n"
               "    raise MemoryError\nfill()")
    assert isinstance(run(ip, failing), RankFailure)
    assert run(ip, "%%mpirun -o held\ngc.collect()\nprint(refs['big']() is not None)") is None
    assert outputs(ip, "held") == ["True\n"] * 4      # kept for inspection until a cell succeeds...
    assert run(ip, "%%mpirun -o held\ngc.collect()\nprint(refs['big']() is not None)") is None
    assert outputs(ip, "held") == ["False\n"] * 4     # ...as that one did: all let go


def test_where_stays_small_and_fast_for_big_values(ip):
    cell = ("%%mpirun -np 4\nfrom collections import defaultdict\nimport sys\n"
            "def load():\n    shard = b'x' * 200_000_000\n"
            "    index = defaultdict(list, {i: [] for i in range(1_000_000)})\n"
            "    seen = set(range(1_000_000))\n    sys.exit(3)\nif rank == 0:\n    load()")
    assert isinstance(run(ip, cell), RankFailure)
    error, seconds = timed_run(ip, "%mpirun --where -o where")
    assert error is None
    text = ip.user_ns["where"][0].stdout
    assert "shard: bytes = b'xxxx" in text and "...' (200,000,000 bytes)" in text
    assert "index: collections.defaultdict = defaultdict({0: [], 1: [], 2: [], 3: [], ...})" in text
    assert "seen: set = {0, 1, 2, 3, 4, 5, ...}" in text
    assert seconds < hang_bound(2.0), seconds   # about a second; a repr of the whole 200 MB: far more
    # at a cell's top level, the variables its code uses: not the namespace's `exit` (an attribute name)
    assert isinstance(run(ip, "%%mpirun\nimport sys\nsys.exit(3)"), RankFailure)
    assert run(ip, "%mpirun --where -o top") is None
    assert " exit: " not in ip.user_ns["top"][0].stdout


def test_a_script_run_again_is_a_new_process_for_its_neighbours_cwd_and_threads(ip, tmp_path):
    for name, value in (("a", 1), ("b", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "utils.py").write_text(f"V = {value}\n")
        (tmp_path / name / "main.py").write_text(
            "import os, threading, time, utils\nprint('utils', utils.V)\nos.chdir('/')\n"
            "threading.Thread(target=lambda: (time.sleep(0.5), print('thread done'))).start()\n")
    os.symlink(tmp_path / "a" / "main.py", tmp_path / "linked.py")   # its folder is a's, as Python's
    assert run(ip, "%%mpirun -np 4\nimport os\nstart = os.getcwd()") is None
    assert run(ip, f"%mpirun -o first {tmp_path / 'linked.py'}") is None
    assert outputs(ip, "first") == ["utils 1\nthread done\n"] * 4      # the thread's line is the script's
    (tmp_path / "a" / "utils.py").write_text("V = 10\n")               # edited between two runs
    assert run(ip, f"%mpirun -o edited {tmp_path / 'a' / 'main.py'}") is None
    assert outputs(ip, "edited") == ["utils 10\nthread done\n"] * 4
    assert run(ip, f"%mpirun -o other {tmp_path / 'b' / 'main.py'}") is None   # another folder's utils
    assert outputs(ip, "other") == ["utils 2\nthread done\n"] * 4
    assert run(ip, "%%mpirun -o cwd\nprint(os.getcwd() == start)") is None
    assert outputs(ip, "cwd") == ["True\n"] * 4
