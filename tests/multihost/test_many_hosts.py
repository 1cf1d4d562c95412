"""%%mpirun at 64 ranks over ssh: 8 namespace hosts x 8 ranks start, reduce, are interrupted by
a timeout and stay usable, and stop without leaving a process behind, here or on any host.

The session's test bed has 4 hosts (``MLPT_HOSTS``); this module rebuilds it with 8 for its own
tests and gives the session its former bed back afterwards. One World serves every test here
(starting 64 ranks on a small machine takes most of a minute); the last test stops it.
"""
import os
import time

import psutil
import pytest

from mlp_magic.unblock.pure.report import HUNG_HINT
from tests import worlds

HOSTS, RANKS_PER_HOST = 8, 8
NP = HOSTS * RANKS_PER_HOST

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow, pytest.mark.alone]   # 64 ranks on 2 cores


def _rebuild(bed, count: int) -> None:
    bed.down()
    bed.count = count
    bed.up()


@pytest.fixture(scope="module")
def big_testbed(ip, testbed):
    """The session's test bed with at least ``HOSTS`` hosts, for this module only."""
    count = testbed.count
    if count >= HOSTS:
        yield testbed
        return
    ip.run_line_magic("mpirun", "--stop")  # no World may outlive the hosts it runs on
    _rebuild(testbed, HOSTS)
    try:
        yield testbed
    finally:
        _rebuild(testbed, count)


def _ours_here(before: set, bed) -> list:
    """Processes of this test on this machine: new descendants of pytest (not the test bed's
    sshds), and any process that carries this session's private mlp_magic home (an orphan that
    left our process tree, e.g. an engine or a launcher reparented to init)."""
    me = psutil.Process()
    found = {}
    for process in me.children(recursive=True):
        try:
            if (process.pid not in before and process.status() != psutil.STATUS_ZOMBIE
                    and bed.workdir not in " ".join(process.cmdline())):
                found[process.pid] = " ".join(process.cmdline())[:160]
        except psutil.Error:
            pass
    home = "MLP_MAGIC_HOME=" + os.environ["MLP_MAGIC_HOME"]
    for process in psutil.process_iter():
        if process.pid == me.pid or process.pid in before or process.pid in found:
            continue
        try:
            if process.status() != psutil.STATUS_ZOMBIE and home in _environ(process.pid):
                found[process.pid] = " ".join(process.cmdline())[:160]
        except psutil.Error:
            pass
    return sorted(found.items())


def _environ(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read().replace(b"\0", b"\n").decode(errors="replace")
    except OSError:
        return ""


def _on_hosts(bed) -> set:
    return {(host.name, pid) for host in bed.hosts for pid, _ in bed.processes_on(host.index)
            if pid != host.sshd_pid}


def _ours_on_hosts(bed, before: set) -> list:
    """Every new process in a namespace host but the host's own (listening) sshd."""
    return [(host.name, pid, line[:160]) for host in bed.hosts
            for pid, line in bed.processes_on(host.index)
            if pid != host.sshd_pid and (host.name, pid) not in before]


def _start(ip, hostfile: str):
    return ip.run_cell(f"%%mpirun --hostfile {hostfile} -np {NP} -o placed\n"
                       "import socket\nprint(socket.gethostname())")


@pytest.fixture(scope="module")
def world64(ip, big_testbed, tmp_path_factory):
    """A started 64-rank World over ssh: (ip, bed, the processes that existed before it here and
    on the hosts)."""
    bed = big_testbed
    hostfile = bed.write_hostfile(str(tmp_path_factory.mktemp("many") / "hostfile"), slots=RANKS_PER_HOST)
    patch = pytest.MonkeyPatch()
    patch.setenv("MLP_MAGIC_SSH", " ".join(bed.ssh_command()))
    for key, value in bed.env().items():
        patch.setenv(key, value)
    ip.run_line_magic("mpirun", "--stop")  # never reuse a World from another suite
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    before_on_hosts = _on_hosts(bed)  # none on a fresh bed; a reused one may hold ssh sessions
    started = time.monotonic()
    result = _start(ip, hostfile)
    took = time.monotonic() - started
    print(f"\n{NP} ranks on {HOSTS} hosts started in {took:.1f} s")
    try:
        assert result.success, f"the World did not start: {result.error_in_exec}"
        yield ip, bed, before, before_on_hosts, hostfile
    finally:
        ip.run_line_magic("mpirun", "--stop")
        patch.undo()


def _still_64(world64) -> None:
    """The fixture's World, started again if the stop test ran first (tests may run in any order)."""
    world = worlds.current_world()
    if world is None or world.np != NP or not world.alive():
        ip, hostfile = world64[0], world64[4]
        assert _start(ip, hostfile).success


def test_64_ranks_start_on_8_hosts_and_allreduce(world64):
    _still_64(world64)
    ip = world64[0]
    world = worlds.current_world()
    assert world is not None and world.np == NP
    placed = ip.user_ns["placed"]
    assert [r.stdout for r in placed] == [f"worker{r // RANKS_PER_HOST}\n" for r in range(NP)]
    started = time.monotonic()
    result = ip.run_cell("%%mpirun -o sums\nprint(comm.allreduce(rank), comm.Get_size())")
    print(f"allreduce cell took {time.monotonic() - started:.1f} s")
    assert result.success, result.error_in_exec
    sums = ip.user_ns["sums"]
    assert [r.rank for r in sums] == list(range(NP))
    assert [r.stdout for r in sums] == [f"{NP * (NP - 1) // 2} {NP}\n"] * NP
    assert sums.ok


def test_a_timeout_interrupts_all_64_ranks_and_the_world_stays_usable(world64, capsys):
    _still_64(world64)
    ip = world64[0]
    capsys.readouterr()
    started = time.monotonic()
    result = ip.run_cell("%%mpirun --timeout 3 -o slow\nimport time\ntime.sleep(60)\nprint('never')")
    elapsed = time.monotonic() - started
    assert elapsed < 45, elapsed  # 3 s, the interrupt, one stack snapshot per host over ssh
    assert f"timeout on ranks 0-{NP - 1} ({NP} of {NP})" in str(result.error_in_exec)
    slow = ip.user_ns["slow"]
    assert [r.status for r in slow] == ["timeout"] * NP
    assert all("never" not in r.stdout for r in slow)
    out = capsys.readouterr().out
    assert "Where each rank is" in out  # the stack snapshot, one ssh command per host
    world = worlds.current_world()
    result = ip.run_cell("%%mpirun -o after\nprint(rank)")
    assert result.success, result.error_in_exec
    assert [r.stdout for r in ip.user_ns["after"]] == [f"{r}\n" for r in range(NP)]
    assert worlds.current_world() == world  # the same World, not a restarted one
    note = next((line for line in out.splitlines() if line.startswith("mlp_magic: ")), "")
    # The interrupt's grace is sized by each host's own cores (8 ranks on 2: 1.4 s, then a second
    # round); the 8 namespace hosts share this machine's 2 cores (32 ranks a core), and with the
    # other xdist worker busy no rank's first traceback may come within it (a rehearsal, once in
    # three). Then the note says they did not stop; they did, as the cell above shows.
    assert note in ("mlp_magic: timed out: the running ranks were interrupted; the World is still usable",
                    f"mlp_magic: timed out: ranks 0-{NP - 1} did not stop on SIGINT (blocked in a C call?); "
                    f"{HUNG_HINT}"), out


def test_stop_leaves_no_process_here_or_on_any_host(world64):
    _still_64(world64)
    ip, bed, before, before_on_hosts, _ = world64
    world = worlds.current_world()
    assert world is not None and world.np == NP and world.alive()
    assert all(len(bed.processes_on(h.index)) > RANKS_PER_HOST for h in bed.hosts)  # ranks running
    assert len(_ours_here(before, bed)) >= NP + 2  # the check below sees the engines, controller, launcher
    started = time.monotonic()
    ip.run_line_magic("mpirun", "--stop")
    print(f"stopped in {time.monotonic() - started:.1f} s")
    assert worlds.current_world() is None
    deadline = time.monotonic() + 15  # ssh sessions and their clients take a moment to end
    while (_ours_here(before, bed) or _ours_on_hosts(bed, before_on_hosts)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ours_on_hosts(bed, before_on_hosts) == []
    assert _ours_here(before, bed) == []
