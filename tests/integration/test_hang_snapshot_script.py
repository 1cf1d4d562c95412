"""The hang report's one script for every remote host (stacks/snapshot.remote_script), run here by
``sh`` as allrun's runner runs it there: each host does its own part, chosen by ALLRUN_HOST."""
import os
import subprocess

from mlp_magic.stacks.snapshot import MARK, remote_script, split_remote_output


def test_each_host_empties_and_prints_only_its_own_ranks_files(tmp_path):
    files = {name: tmp_path / f"{name}.stacks" for name in ("a0", "a1", "b2")}
    for path in files.values():
        path.write_text("old dump\n")
    # pid 1 is no engine of ours: it is never signalled, and its file stays empty
    by_host = {"worker-a": [(0, 1, str(files["a0"])), (1, 1, str(files["a1"]))],
               "worker-b": [(2, 1, str(files["b2"]))]}
    done = subprocess.run(["sh", "-c", remote_script(by_host, wait=0.2)], capture_output=True, text=True,
                          env=dict(os.environ, ALLRUN_HOST="worker-b"), timeout=20)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{MARK}2\n"
    assert split_remote_output(done.stdout) == {2: "\n"}
    assert files["b2"].read_text() == ""                      # this host's: emptied for the new dump
    assert files["a0"].read_text() == files["a1"].read_text() == "old dump\n"   # another host's
