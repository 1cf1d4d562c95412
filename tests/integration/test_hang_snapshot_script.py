"""The hang report's one script for every remote host (stacks/snapshot.remote_script), run here by
``sh`` as allrun's runner runs it there: each host does its own part, chosen by ALLRUN_HOST."""
import os
import subprocess
import sys

from mlp_magic.engine.identity import PROGRAM as ENGINE_PROGRAM
from mlp_magic.engine.side_signal import COLLECTIVES_SIGNAL

from mlp_magic.stacks.snapshot import MARK, Target, remote_script, split_remote_output


def test_each_host_empties_and_prints_only_its_own_ranks_files(tmp_path):
    files = {name: tmp_path / f"{name}.stacks" for name in ("a0", "a1", "b2")}
    for path in files.values():
        path.write_text("old dump\n")
    # pid 1 is no engine of ours: it is never signalled, and its file stays empty
    by_host = {"worker-a": [Target(0, 1, str(files["a0"])), Target(1, 1, str(files["a1"]))],
               "worker-b": [Target(2, 1, str(files["b2"]))]}
    done = subprocess.run(["sh", "-c", remote_script(by_host, wait=0.2)], capture_output=True, text=True,
                          env=dict(os.environ, ALLRUN_HOST="worker-b"), timeout=20)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{MARK}2\n"
    assert split_remote_output(done.stdout) == ({2: "\n"}, {})
    assert files["b2"].read_text() == ""                      # this host's: emptied for the new dump
    assert files["a0"].read_text() == files["a1"].read_text() == "old dump\n"   # another host's


# A process standing for an engine of ours (its command line names the engine's module, as the
# script checks) with the recorder thread; torch.distributed is never imported: no groups.
RANK = ("import faulthandler, signal, sys, time\n"
        "from mlp_magic.stacks.rank import recorder\n"
        "faulthandler.register(signal.SIGUSR1, file=open(sys.argv[1], 'a'), all_threads=True)\n"
        "assert recorder.install()\nprint('ready', flush=True)\ntime.sleep(60)")


def test_a_rank_answers_its_collectives_after_its_stacks_and_a_stranger_is_never_asked(tmp_path):
    stacks, answer = tmp_path / "r.stacks", tmp_path / "r.collectives.json"
    (tmp_path / "stacks").mkdir()   # the engine's start makes it (engine/bootstrap)
    rank = subprocess.Popen([sys.executable, "-c", RANK, str(stacks), ENGINE_PROGRAM], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, MLP_MAGIC_HOME=str(tmp_path)))
    # a stranger that catches the signal too (its handler would run): not an engine of ours
    caught = tmp_path / "stranger-caught"
    stranger = subprocess.Popen([sys.executable, "-c", STRANGER, str(caught), str(COLLECTIVES_SIGNAL)],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert rank.stdout.readline() == "ready\n" and stranger.stdout.readline() == "ready\n"
        by_host = {"worker-a": [Target(0, rank.pid, str(stacks), collectives_path_of(tmp_path, rank.pid)),
                                Target(1, stranger.pid, str(tmp_path / "s.stacks"), str(answer))]}
        done = subprocess.run(["sh", "-c", remote_script(by_host, wait=3.0)], capture_output=True, text=True,
                              env=dict(os.environ, ALLRUN_HOST="worker-a"), timeout=30)
        assert done.returncode == 0, done.stderr
        dumps, answers = split_remote_output(done.stdout)
        assert "Current thread" in dumps[0] or "Thread 0x" in dumps[0], dumps
        assert answers == {0: [], 1: None}, done.stdout
        assert stranger.poll() is None and rank.poll() is None   # nobody died of a signal
        assert not caught.exists()   # the stranger was never signalled
    finally:
        for child in (rank, stranger):
            child.kill()
            child.wait()


STRANGER = ("import signal, sys, time\n"
            "signal.signal(int(sys.argv[2]), lambda *_: open(sys.argv[1], 'w').close())\n"
            "print('ready', flush=True)\ntime.sleep(60)")


def collectives_path_of(home, pid: int) -> str:
    return str(home / "stacks" / f"{pid}.collectives.json")
