"""%%mpirun against a real World: real mpiexec, real ipyparallel engines, real mpi4py and torch."""
import os
import time

import pytest

from mlp_magic.errors import MlpMagicError, RankFailure
from tests import worlds
from tests.timing import hang_bound

from tests.integration.conftest import child_pids, run, timed_run

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(autouse=True)
def four_ranks(ip):
    """Each test starts from a live 4-rank World (its cells say no -np), whatever ran before it."""
    world = worlds.current_world()
    if world is None or not world.alive() or world.np != 4:
        assert run(ip, "%%mpirun -np 4\npass") is None


def test_each_rank_gets_its_identity_and_torch_variables(ip, capsys):
    error = run(ip, """%%mpirun -np 4 -o ids
import os
print(rank, world_size, local_rank, node_rank)
print(*(os.environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                 "NODE_RANK", "GROUP_RANK", "MASTER_ADDR")))
print(os.environ["MASTER_PORT"])
""")
    assert error is None
    ids = ip.user_ns["ids"]
    assert len(ids) == 4
    for r in range(4):
        first, second, _ = ids[r].stdout.splitlines()
        assert first == f"{r} 4 {r} 0"
        assert second == f"{r} 4 {r} 4 0 0 127.0.0.1"
        assert ids[r].status == "ok"
    ports = {ids[r].stdout.splitlines()[2] for r in range(4)}
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536  # one MASTER_PORT for all ranks
    # each rank says which CPUs it may run on; an interrupt's grace follows the busiest host's
    # ranks per CPU (here, all on this machine)
    identities = worlds.current_world().identities.values()
    allowed = set().union(*(identity["cpus"] for identity in identities))
    assert allowed and allowed <= ip.call(os.sched_getaffinity, 0)   # the kernel's CPUs
    assert worlds.current_world().ranks_per_cpu == 4 / len(allowed)


def test_identical_output_is_shown_once_under_folded_ranks(ip, capsys):
    run(ip, "%%mpirun\nprint('same everywhere')")
    out = capsys.readouterr().out
    summary = out[out.index("----"):]
    assert "ranks 0-3 (4) on localhost" in summary
    assert summary.count("same everywhere") == 1


def test_state_persists_between_cells(ip):
    assert run(ip, "%%mpirun\nkept = rank * 10") is None
    assert run(ip, "%%mpirun -o kept_out\nprint(kept + 1)") is None
    assert [ip.user_ns["kept_out"][r].stdout for r in range(4)] == ["1\n", "11\n", "21\n", "31\n"]


def test_mpi4py_allreduce(ip):
    cell = "%%mpirun -o red\nfrom mpi4py import MPI\nprint(MPI.COMM_WORLD.allreduce(rank + 1))"
    assert run(ip, cell) is None
    assert {r.stdout for r in ip.user_ns["red"]} == {"10\n"}


def test_torch_gloo_all_reduce(ip):
    error = run(ip, """%%mpirun -o tr
import torch, torch.distributed as dist
if not dist.is_initialized():
    dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(int(t.item()), dist.get_rank(), dist.get_world_size())
""")
    assert error is None
    assert [r.stdout for r in ip.user_ns["tr"]] == [f"10 {r} 4\n" for r in range(4)]


def test_errors_are_grouped_and_the_cell_fails(ip, capsys):
    error = run(ip, """%%mpirun -o bad
if rank in (1, 3):
    raise ValueError(f"odd rank")
print("fine")
""")
    assert isinstance(error, RankFailure)
    assert "error on ranks 1,3 (2 of 4)" in str(error)
    out = capsys.readouterr().out
    summary = out[out.index("----"):]
    assert summary.count("ValueError: odd rank") == 1  # one group for both failing ranks
    assert "ranks 1,3 (2) on localhost [error]" in summary
    bad = ip.user_ns["bad"]
    assert [r.status for r in bad] == ["ok", "error", "ok", "error"]
    assert "ValueError: odd rank" in bad[1].error


def test_ranks_option_targets_a_subset(ip):
    assert run(ip, "%%mpirun --ranks 0,2-3 -o sub\nprint(rank)") is None
    assert [r.rank for r in ip.user_ns["sub"]] == [0, 2, 3]


def test_each_rank_reports_how_long_it_ran(ip):
    """Measured on the rank (engine/quiet sends seconds, not a date the client must parse)."""
    assert run(ip, "%%mpirun -np 4 -o timed\nimport time\ntime.sleep(1.5 if rank == 1 else 0)") is None
    durations = [r.duration for r in ip.user_ns["timed"]]
    assert all(isinstance(d, float) for d in durations), durations
    # rank 1's own 1.5 s; the others' milliseconds, with room for a loaded machine
    assert durations[1] >= 1.5 and max(durations[0], durations[2], durations[3]) < 1.0, durations


def test_rank_zero_rich_output_is_displayed(ip, capsys):
    run(ip, "%%mpirun -o values\nrank + 100")
    out = capsys.readouterr().out.splitlines()
    # whole lines: rank 0's value only, saying whose (it was a bare `100`), and how to see all
    assert "[rank 0] 100" in out and not any(line.endswith("103") for line in out), out
    assert any("| outputs: rank 0's (--all-outputs: every rank's) |" in line for line in out), out
    values = ip.user_ns["values"]
    assert [r.displays[-1]["data"]["text/plain"] for r in values] == ["100", "101", "102", "103"]
    run(ip, "%%mpirun --all-outputs\nrank + 100")
    out = capsys.readouterr().out
    assert "[rank 3] 103" in out


def test_timeout_returns_and_names_running_ranks(ip, capsys):
    error, elapsed = timed_run(ip, "%%mpirun --timeout 2 -o slow\nimport time\n"
                                   "if rank != 0:\n    time.sleep(60)\nprint('quick')")
    assert elapsed < hang_bound(2 + 1), elapsed   # the 2 s timeout and the interrupt, not the 60 s sleep
    assert "timeout on ranks 1-3" in str(error)
    assert [r.status for r in ip.user_ns["slow"]] == ["ok", "timeout", "timeout", "timeout"]
    assert "World is still usable" in capsys.readouterr().out
    assert run(ip, "%%mpirun -o after\nprint('next cell works')") is None
    assert {r.stdout for r in ip.user_ns["after"]} == {"next cell works\n"}


def test_every_byte_goes_to_the_log_while_the_display_is_capped(ip, capsys):
    error = run(ip, "%%mpirun -o big\nif rank == 1:\n    print('x' * 3_000_000)\nelse:\n    print('small')")
    assert error is None
    big = ip.user_ns["big"]
    log_dir = big.log_dir
    with open(os.path.join(log_dir, "rank1.stdout")) as handle:
        assert handle.read() == "x" * 3_000_000 + "\n"
    assert big[1].stdout == "x" * 3_000_000 + "\n"   # -o keeps it whole: read back from the log
    assert open(os.path.join(log_dir, "rank0.stdout")).read() == "small\n"
    ip.call(_summary_written, "big")   # a Future, the kernel's: waited for there
    assert os.path.exists(os.path.join(log_dir, "summary.json"))
    shown = capsys.readouterr().out
    assert log_dir in shown and "more characters not shown" in shown   # the notebook: capped
    assert shown.count("x") < 2_000_000   # the live tail and the summary, each capped: not the 3 MB


def _summary_written(name: str) -> None:
    """In the kernel: wait for the background write of the summary.json of the results ``name``."""
    from IPython import get_ipython

    get_ipython().user_ns[name].summary_written.result(timeout=10)


def test_bad_np_changes_nothing(ip, capsys):
    world = worlds.current_world()
    error = run(ip, "%%mpirun -np 0\nprint('never')")
    assert isinstance(error, MlpMagicError)
    assert "-np" in str(error) and "'0'" in str(error)
    assert worlds.current_world() == world and world.alive()


@pytest.mark.parametrize("where, why", [("/proc/nope", "No such file or directory"),
                                        ("/etc/passwd", "a file, not a folder")])
def test_a_log_dir_that_cannot_hold_the_logs_is_refused_before_anything_runs(ip, where, why):
    """It was ignored in silence: the logs went to the default root, the footer named a folder that
    did not exist, and summary.json was written nowhere."""
    world = worlds.current_world()
    error = run(ip, f"%%mpirun --log-dir {where}\nprint('never')")
    assert isinstance(error, MlpMagicError) and "\n" not in str(error)
    assert str(error) == f"--log-dir '{where}': cannot keep the logs there: {why}"
    assert worlds.current_world() == world   # nothing started, nothing stopped


def test_unknown_variable_is_named(ip):
    error = run(ip, "%%mpirun -np $MLP_NO_SUCH_VARIABLE\npass")
    assert "$MLP_NO_SUCH_VARIABLE" in str(error)


def test_np_from_user_namespace_and_environment(ip):
    ip.user_ns["n_ranks"] = 4
    assert run(ip, "%%mpirun -np $n_ranks -o viavar\nprint(world_size)") is None
    assert len(ip.user_ns["viavar"]) == 4


def test_restart_on_new_np_and_clean_stop(ip):
    run(ip, "%mpirun --stop")
    before = child_pids()  # other suites' helpers (a browser driver...) are not ours to judge
    assert run(ip, "%%mpirun -np 2 -o two\nprint(world_size)") is None
    assert [r.stdout for r in ip.user_ns["two"]] == ["2\n", "2\n"]
    world = worlds.current_world()
    files = [world.workdir] + [i["stacks_path"] for i in world.identities.values()]
    assert all(os.path.exists(f) for f in files)
    assert run(ip, "%mpirun --stop") is None
    assert not any(os.path.exists(f) for f in files)  # connection files (HMAC key), stack files
    assert worlds.current_world() is None
    deadline = time.monotonic() + 10
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert child_pids() - before == set(), "stray processes after stop"
    assert run(ip, "%%mpirun -np 4\nprint('back')") is None  # the next tests get 4 ranks again


def _prune_only_by_the_engines(root: str) -> set:
    """In the kernel: its own pass over ``root`` marked as done (output/logs._pruned_roots), so
    that only the engines may prune there; returns the set it replaced."""
    from mlp_magic.output import logs

    kept, logs._pruned_roots = logs._pruned_roots, {root}
    return kept


def _pruned_roots_back(kept: set) -> None:
    from mlp_magic.output import logs

    logs._pruned_roots = kept


def test_each_hosts_first_engine_removes_expired_cell_logs(ip, tmp_path, monkeypatch):
    """Every host keeps its own logs: a World's start has them pruned there, by the host's first
    engine (this kernel's own pass on its first cell is left out here)."""
    from mlp_magic import config

    root = tmp_path / "logs"
    monkeypatch.setenv("MLP_MAGIC_LOG_DIR", str(root))
    monkeypatch.setenv(config.LOG_KEEP_DAYS, "10")
    ago = time.time() - 11 * 86400
    expired = root / (time.strftime("%Y%m%d-%H%M%S", time.localtime(ago)) + "-77-0001")
    kept = root / (time.strftime("%Y%m%d-%H%M%S", time.localtime(ago)) + "-77-0002")
    for folder in (expired, kept):
        folder.mkdir(parents=True)
        (folder / "rank0.stdout").write_text("old\n")
    os.utime(expired, (ago, ago))   # `kept` was changed just now: it stays
    kept_roots = ip.call(_prune_only_by_the_engines, str(root))   # in the kernel, which logs the cells
    try:
        run(ip, "%mpirun --stop")
        assert run(ip, "%%mpirun -np 2\npass") is None
        deadline = time.monotonic() + 10
        while expired.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not expired.exists() and kept.exists()
    finally:
        ip.call(_pruned_roots_back, kept_roots)
    assert run(ip, "%%mpirun -np 4\npass") is None   # the next tests get 4 ranks again


def test_plain_engines_without_mpi(ip, monkeypatch, capsys):
    run(ip, "%mpirun --stop")
    monkeypatch.setenv("MLP_MAGIC_MPIEXEC", "none")
    try:
        assert run(ip, "%%mpirun -np 2 -o plain\nimport os\nprint(rank, os.environ['WORLD_SIZE'])") is None
        assert "no MPI" in capsys.readouterr().out
        assert [r.stdout for r in ip.user_ns["plain"]] == ["0 2\n", "1 2\n"]
        # `mlp-magic stacks` tells this World's ranks by their environment, as a job of its own
        from mlp_magic.core.proc_ranks import parse_environ, rank_of

        world = worlds.current_world()
        for rank, identity in world.identities.items():
            with open(f"/proc/{identity['pid']}/environ", "rb") as handle:
                found = rank_of(parse_environ(handle.read()))
            job = f"mlp_magic {os.path.basename(world.workdir)}"
            assert (found.rank, found.size, found.job) == (rank, 2, job)
    finally:
        run(ip, "%mpirun --stop")


def test_world_publishes_its_state_and_gpus_for_the_panel(ip):
    from mlp_magic.world import published as world_state

    assert run(ip, "%%mpirun -np 4\npass") is None
    mine = [w for w in world_state.read_worlds() if w["pid"] == ip.pid]   # the kernel's World
    assert len(mine) == 1
    state = mine[0]
    assert [r["rank"] for r in state["ranks"]] == [0, 1, 2, 3]
    assert {r["state"] for r in state["ranks"]} == {"idle"}
    assert state["gpus"]["localhost"]["source"] == "none"  # CPU-only here, probed by the engines
    assert state["processes"] and all(p["pid"] and p["create_time"] for p in state["processes"])


def test_a_world_withdraws_its_record_where_it_wrote_it(ip, monkeypatch, tmp_path):
    """The state folder changed under a running World (a test, a user's %env): its stop still
    removes its record, or the panel would show its engines as long as the kernel lives."""
    from mlp_magic.world import published as world_state

    first, later = tmp_path / "first", tmp_path / "later"
    run(ip, "%mpirun --stop")
    monkeypatch.setenv("MLP_MAGIC_STATE_DIR", str(first))
    assert run(ip, "%%mpirun -np 2\npass") is None
    assert [w["pid"] for w in world_state.read_worlds(str(first))] == [ip.pid]
    monkeypatch.setenv("MLP_MAGIC_STATE_DIR", str(later))
    assert run(ip, "%mpirun --stop") is None
    assert world_state.read_worlds(str(first)) == [] and world_state.read_worlds(str(later)) == []


def test_a_master_port_already_taken_is_replaced_with_a_notice(ip, monkeypatch, capsys):
    import socket

    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        monkeypatch.setenv("MASTER_PORT", str(taken))
        run(ip, "%mpirun --stop")
        assert run(ip, "%%mpirun -np 2 -o port\nimport os\nprint(os.environ['MASTER_PORT'])") is None
        out = capsys.readouterr().out
        assert f"MASTER_PORT {taken} (from the environment) is already in use on localhost" in out
        ports = {r.stdout.strip() for r in ip.user_ns["port"]}
        assert len(ports) == 1 and ports != {str(taken)}
    run(ip, "%mpirun --stop")


def test_local_device_helper_on_every_rank(ip):
    cell = ("%%mpirun -np 4 -o dev\nfrom mlp_magic.helpers import local_device, local_rank\n"
            "print(local_device(), local_rank() == rank)")
    assert run(ip, cell) is None
    assert {r.stdout for r in ip.user_ns["dev"]} == {"cpu True\n"}  # no GPU on this machine


def test_pssh_user_or_port_is_refused_with_where_it_belongs(ip, tmp_path):
    hostfile = tmp_path / "pssh_hosts"
    hostfile.write_text("root@10.77.0.11:2222\n")
    world = worlds.current_world()
    error = run(ip, f"%%mpirun --hostfile {hostfile} -np 1\npass")
    assert isinstance(error, MlpMagicError)
    assert "10.77.0.11 has user root" in str(error) and "~/.ssh/config" in str(error)
    assert worlds.current_world() == world  # nothing changed


def test_listen_address_checks():
    from mlp_magic.world.start.addresses import controller_ip

    assert controller_ip([], env={"MLP_HOST": "127.0.0.1"}) == "127.0.0.1"
    with pytest.raises(MlpMagicError, match="every interface"):
        controller_ip([], env={"MLP_HOST": "0.0.0.0"})
