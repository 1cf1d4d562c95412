"""``%%mpirun --profile`` across namespace hosts: each rank's py-spy runs on its own host, and the
straggler on the second host is named by its arrivals at gloo's all_reduce."""
import re

import pytest

pytestmark = pytest.mark.timeout(300)


def test_the_straggler_on_the_second_host_is_named_and_every_host_is_sampled(two_hosts, capsys):
    ip, hostfile, _ = two_hosts
    assert ip.run_cell(f"%%mpirun --hostfile {hostfile} -np 4\n"
                       "import time, torch, torch.distributed as dist\n"
                       "dist.init_process_group('gloo')\nx = torch.ones(4)").success
    capsys.readouterr()
    cell = ip.run_cell("%%mpirun --profile -o prof\nimport socket\n"
                       "def work(seconds):\n    began = time.perf_counter()\n"
                       "    while time.perf_counter() - began < seconds:\n        pass\n"
                       "for i in range(12):\n    work(0.15 if rank == 3 else 0.02)\n    dist.all_reduce(x)\n"
                       "print(socket.gethostname())")
    out = capsys.readouterr().out
    assert cell.success, (cell.error_in_exec, out)
    assert re.search(r"^rank 3 entered last at 1[0-2] of 12 collectives \(all_reduce #", out, re.M), out
    assert "ranks 0-2 (3) waited " in out and " in all_reduce for rank 3" in out, out
    kept = ip.user_ns["prof"]
    assert [r.stdout for r in kept] == ["worker0\n", "worker0\n", "worker1\n", "worker1\n"]
    assert all(sum(kept.profile.stacks[rank].values()) > 0 for rank in range(4)), kept.profile.errors
