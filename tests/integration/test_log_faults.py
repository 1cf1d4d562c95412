"""Issue 32's fault: the log folder's disk fills up. The cell's output still reaches the
notebook, one warning names where the logs could not go, nothing hangs, and the World still
works. A real full disk: a 256 KiB tmpfs, filled before the cell."""
import os
import subprocess

import pytest

from tests.integration.conftest import child_pids, run, timed_run
from tests.timing import hang_bound, wait_until

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def full_disk(tmp_path):
    where = tmp_path / "small"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        (where / "logs").mkdir(mode=0o700)
        filler = os.open(where / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for _ in range(1024):   # 4 MiB at most: the 256 KiB fill up long before
                os.write(filler, b"x" * 4096)
        except OSError:
            pass   # full
        finally:
            os.close(filler)
        yield where / "logs"
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_log_disk_loses_no_output_and_says_so_once(ip, capsys, full_disk):
    run(ip, "%mpirun --stop")
    before = child_pids()
    try:
        assert run(ip, "%%mpirun -np 4\npass") is None
        capsys.readouterr()
        error, took = timed_run(ip, f"%%mpirun --log-dir {full_disk} -o said\n"
                                    "print('hello from', rank, 'x' * 2000)\n")
        out = capsys.readouterr().out
        assert error is None, out
        assert took < hang_bound(10), took
        said = [r.stdout.split()[:3] for r in ip.user_ns["said"]]
        assert said == [["hello", "from", str(r)] for r in range(4)]
        summary = out[out.rindex("---------------- "):]   # the summary (a terminal shows the live tail too)
        warnings = [line for line in summary.splitlines() if "was not logged" in line]
        assert len(warnings) == 1 and str(full_disk) in warnings[0], summary
        assert "No space left" in warnings[0], summary
        assert run(ip, "%%mpirun -o again\nprint(rank)") is None   # the World is fine
        assert [r.stdout for r in ip.user_ns["again"]] == [f"{r}\n" for r in range(4)]
    finally:
        run(ip, "%mpirun --stop")
        assert wait_until(lambda: not child_pids() - before), "processes left behind"
