"""engine/side_signal: an action named "module:function" is imported at its signal's first
coming (a rank holds none of it until then), the signal is caught from the start (the kernel and
the agents signal only a process that catches it), and no action runs past the process's exit.
Each runs in a fresh interpreter: what a process has imported is the thing under test."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

LAZY = """
    import json, os, signal, sys, time
    sys.path.insert(0, sys.argv[1])
    from mlp_magic.core.proc_stat import catches
    from mlp_magic.engine import side_signal
    signum = int(signal.SIGRTMIN) + 12   # none of ours
    marker = os.path.join(sys.argv[1], "acted")

    def status():
        with open("/proc/self/status") as file:
            return file.read()

    def acted(seconds=10):
        deadline = time.monotonic() + seconds
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.01)
        return os.path.exists(marker)
"""


def fresh_python(code: str, folder) -> dict:
    """Run ``code`` in a new interpreter (``folder`` its first argument); its last line: JSON."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(LAZY) + textwrap.dedent(code), str(folder)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_action_named_by_its_module_is_imported_at_the_first_signal_only(tmp_path):
    (tmp_path / "lazy_action.py").write_text(
        "import os, sys\n\ndef act():\n    open(os.path.join(sys.argv[1], 'acted'), 'a').write('x')\n")
    found = fresh_python("""
        assert side_signal.on_signal(signum, "lazy_action:act", "test-lazy")
        held_before = "lazy_action" in sys.modules
        caught = catches(status(), signum)
        os.kill(os.getpid(), signum)
        first = acted()
        os.unlink(marker)
        os.kill(os.getpid(), signum)   # again: the same function, imported once
        print(json.dumps({"held_before": held_before, "caught": caught, "first": first,
                          "again": acted(), "held_after": "lazy_action" in sys.modules}))
    """, tmp_path)
    assert found == {"held_before": False, "caught": True, "first": True, "again": True, "held_after": True}


def test_an_action_that_cannot_be_imported_leaves_the_thread_answering(tmp_path):
    (tmp_path / "good_action.py").write_text(
        "import os, sys\n\ndef act():\n    open(os.path.join(sys.argv[1], 'acted'), 'a').write('x')\n")
    found = fresh_python("""
        assert side_signal.on_signal(signum, "no_such_module_here:act", "test-missing")
        os.kill(os.getpid(), signum)
        time.sleep(0.3)
        alive = [t.name for t in __import__("threading").enumerate() if t.name == "test-missing"]
        print(json.dumps({"alive": alive}))
    """, tmp_path)
    assert found == {"alive": ["test-missing"]}


def test_at_exit_a_running_action_is_waited_for_and_none_starts_after(tmp_path):
    """mpi4py's MPI_Finalize runs at exit: a side thread inside MPI then must be out first, and
    a signal that comes during the exit starts nothing."""
    (tmp_path / "slow_action.py").write_text(
        "import os, sys, time\n\ndef act():\n    open(os.path.join(sys.argv[1], 'began'), 'w').close()\n"
        "    time.sleep(0.3)\n    open(os.path.join(sys.argv[1], 'acted'), 'a').write('x')\n")
    found = fresh_python("""
        assert side_signal.on_signal(signum, "slow_action:act", "test-slow")
        os.kill(os.getpid(), signum)
        began = os.path.join(sys.argv[1], "began")
        while not os.path.exists(began):
            time.sleep(0.01)
        side_signal._at_exit()   # what atexit runs
        waited = os.path.exists(marker)
        os.unlink(marker)
        os.kill(os.getpid(), signum)
        print(json.dumps({"waited": waited, "after_exit": acted(0.5)}))
    """, tmp_path)
    assert found == {"waited": True, "after_exit": False}
