"""``%%mpirun --profile``: every rank sampled by a real py-spy while the cell runs, and the report
names the rank the others waited for. In the session's real kernel, real mpiexec, real engines,
torch's gloo and its flight recorder."""
import json
import os
import re
import stat

import pytest

from mlp_magic.profile.pure.report import default_rate
from mlp_magic.world import published

from tests.integration.conftest import run

pytestmark = pytest.mark.timeout(300)

GLOO = ("%%mpirun\nimport time, torch, torch.distributed as dist\ndist.init_process_group('gloo')\n"
        "x = torch.ones(4)")
# Rank 2 works 0.15 s before each all_reduce, the others 0.02 s: they wait in it for rank 2.
STRAGGLER = """%%mpirun --profile --rate 50 -o prof
def slow_step():
    began = time.perf_counter()
    while time.perf_counter() - began < 0.15:
        pass

def step():
    began = time.perf_counter()
    while time.perf_counter() - began < 0.02:
        pass

for i in range(12):
    slow_step() if rank == 2 else step()
    dist.all_reduce(x)
print("trained")
"""


def _first_places(out: str) -> set:
    """The place each group of ranks spent most of the cell in (the report's group lines)."""
    groups = re.findall(r"^ranks? [\d,-]+(?: \(\d+\))?: (.*?) \d+(?:-\d+)? %", out, re.M)
    assert groups, out
    return set(groups)


def test_the_rank_that_works_longer_before_each_collective_is_named_and_the_others_wait(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, GLOO) is None
    capsys.readouterr()
    cell = ip.run_cell(STRAGGLER)
    assert cell.success, cell.error_in_exec
    out = capsys.readouterr().out
    # 50 Hz: at the default rate here (9 Hz), a rank's 8 % in step is a sample or none
    assert "profile of ranks 0-3 at 50 Hz over" in out and "not 100" not in out, out
    # its own line: its time went elsewhere
    assert re.search(r"^rank 2: slow_step \(cell:[34]\) \d+ %", out, re.M), out
    verdict = next(line for line in out.splitlines() if line.startswith("rank 2 entered last at "))
    # last at 10 or more of the 12: chance would do that less than once in a thousand cells
    assert re.match(r"rank 2 entered last at 1[0-2] of 12 collectives \(all_reduce #", verdict), out
    assert "its time went to slow_step (cell:" in verdict, out
    assert "ranks 0-1,3 (3) waited " in out and " in all_reduce for rank 2" in out, out
    # the picture: every rank's samples merged, the odd rank's frames marked; the arrivals' timeline
    page = next(m["content"]["data"]["text/html"] for m in cell.messages if m["msg_type"] == "display_data"
                and "mlp-flame" in m["content"]["data"].get("text/html", ""))
    assert "cell:13 &lt;module&gt; · all ranks · " in page and "slow_step · rank 2 · " in page, page
    assert re.search(r"cell:\d+ step · ranks 0-1,3 · ", page) and "<svg" in page and ">rank 3</text>" in page
    kept = ip.user_ns["prof"]
    assert [r.stdout for r in kept] == ["trained\n"] * 4   # the cell's result, as -o keeps any cell's
    report = kept.profile
    assert report.straggler == 2 and sorted(report.stacks) == [0, 1, 2, 3], report
    assert [len(report.entered[rank]) for rank in range(4)] == [12] * 4
    folder = os.path.join(kept.log_dir, "profile")
    written = open(os.path.join(folder, "rank-2.txt")).read()
    # collapsed stacks, as flamegraph.pl reads them
    assert re.search(r"^<module> \(<cell>:12\);slow_step \(<cell>:[34]\) \d+$", written, re.M), written
    assert stat.S_IMODE(os.stat(os.path.join(folder, "rank-2.txt")).st_mode) == 0o600
    every_rank = json.load(open(os.path.join(folder, "ranks.speedscope.json")))   # one profile a rank
    assert [p["name"] for p in every_rank["profiles"]] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert stat.S_IMODE(os.stat(os.path.join(folder, "ranks.speedscope.json")).st_mode) == 0o600


def test_ranks_that_do_the_same_work_have_no_straggler(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, GLOO) is None
    capsys.readouterr()
    assert run(ip, "%%mpirun --profile --rate 50\nfor i in range(6):\n    time.sleep(0.1)\n"
                   "    dist.all_reduce(x)") is None
    out = capsys.readouterr().out
    assert "profile of ranks 0-3 at 50 Hz over" in out, out
    assert _first_places(out) == {"<module> (cell:2)"}, out   # sleeping on every rank
    # the World's record keeps the last profile for the panel
    profile = [w for w in published.read_worlds() if w["pid"] == ip.pid][0]["profile"]
    assert profile["lines"][0].startswith("profile of ranks 0-3 at 50 Hz over"), profile
    assert profile["straggler"] is None and profile["folder"].endswith("/profile"), profile
    assert any(line.startswith(("no rank was late: at each of 6 collectives", "no straggler: ",
                                "no one straggler: ")) for line in out.splitlines()), out


def test_a_world_without_torch_says_what_the_report_lacks(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, "%%mpirun --profile\nimport time\nfor i in range(3):\n    time.sleep(0.05)\n"
                   "    comm.allreduce(rank)") is None
    out = capsys.readouterr().out
    # 4 ranks on this 2-core machine: the default rate keeps the samplers within 3 % of its CPUs
    rate = default_rate(4 / len(os.sched_getaffinity(0)))
    assert f"profile of ranks 0-3 at {rate} Hz over" in out, out
    if rate < 100:
        assert f"(at {rate} Hz, not 100: " in out and "--rate HZ sets it)" in out, out
    assert _first_places(out) == {"<module> (cell:3)"}, out
    assert ("no torch.distributed collective was recorded in the cell: the straggler is named by when each "
            "rank enters a collective (torch's flight recorder); MPI's are not recorded") in out, out


def test_bad_input_is_one_line_and_no_cell_runs(fresh_world, capsys, tmp_path, monkeypatch):
    ip = fresh_world
    marker = "%%mpirun --profile{}\nran = True"
    for options, expected in [
        (" --rate 0", "--rate: expected a positive integer up to 1000, got '0'"),
        (" --rate 5000", "--rate: expected a positive integer up to 1000, got '5000'"),
        (" --pdb", "%%mpirun: --profile and --pdb do not go together"),
        (" --post-mortem", "%%mpirun: --post-mortem and --profile do not go together"),
    ]:
        error = run(ip, marker.format(options))
        assert error is not None and expected in str(error), (options, error)
        assert "\n" not in str(error).strip(), error
    # a py-spy that may not attach (ptrace refused, as in a container without CAP_SYS_PTRACE)
    fake = tmp_path / "py-spy"
    fake.write_text("#!/bin/sh\n"
                    "echo 'Error: Failed to copy PyCodeObject (Operation not permitted (os error 1))'"
                    " >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    error = run(ip, marker.format(""))
    assert "%%mpirun --profile: ranks 0-3: py-spy could not sample this rank: " in str(error), error
    assert "CAP_SYS_PTRACE" in str(error) and str(error).endswith("the cell did not run"), error
    monkeypatch.undo()
    assert run(ip, "%%mpirun -o ran\nprint(globals().get('ran'))") is None
    assert [r.stdout for r in ip.user_ns["ran"]] == ["None\n"] * 4


def test_a_cell_that_times_out_still_gets_its_report(fresh_world, capsys):
    ip = fresh_world
    error = run(ip, "%%mpirun --profile --timeout 2 -o spun\nimport time\ndef spin():\n    while True:\n"
                    "        time.sleep(0.001)\nspin()")
    assert error is not None, "the cell should time out"
    out = capsys.readouterr().out
    assert re.search(r"profile of ranks 0-3 at \d+ Hz over", out), out
    assert _first_places(out) == {"spin (cell:4)"}, out
    assert sorted(ip.user_ns["spun"].profile.stacks) == [0, 1, 2, 3]


def test_a_rank_that_dies_in_the_cell_costs_only_its_own_samples(fresh_world, capsys):
    ip = fresh_world
    error = run(ip, "%%mpirun --profile -o died\nimport os, signal, time\ndef work():\n"
                    "    began = time.perf_counter()\n"
                    "    while time.perf_counter() - began < 1:\n        pass\n"
                    "work()\nif rank == 2:\n    os.kill(os.getpid(), signal.SIGKILL)")
    assert "died" in str(error), error
    out = capsys.readouterr().out
    assert "rank 2: not sampled: it died in the cell" in out, out
    assert _first_places(out) == {"work (cell:4)"}, out
    assert sorted(ip.user_ns["died"].profile.stacks) == [0, 1, 3]
