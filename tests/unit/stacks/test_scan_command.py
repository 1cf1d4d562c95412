"""The scanner every remote host starts for each ``mlp-magic stacks`` call (``collect.scan_command``):
it runs as a shell command, answers in JSON lines, and stays light (its imports are paid per host,
per call, on hosts that may be busy)."""
from __future__ import annotations

import json
import os
import subprocess

from mlp_magic.commands.pure.table import STACKS, options_for
from mlp_magic.stacks.collect import scan_command

# What the scanner must not load: runpy (-m), concurrent.futures and logging (a thread pool),
# site (-S), and the heavier parts of mlp_magic's own command side.
HEAVY = {"runpy", "concurrent.futures", "logging", "site", "argparse", "asyncio", "dataclasses",
         "mlp_magic.stacks.pure.jobs", "mlp_magic.allrun"}


def test_the_scanner_answers_and_loads_nothing_heavy(tmp_path):
    target = subprocess.Popen(["sleep", "30"])
    try:
        command = scan_command(options_for(STACKS, pids=[target.pid], timeout=4.0))
        assert "sys.exit(main())" in command
        probe = command.replace("sys.exit(main())",
                                "code = main(); print(*sorted(sys.modules), file=sys.stderr); sys.exit(code)")
        done = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, timeout=30, cwd=tmp_path,
                              env=dict(os.environ, PYTHONPATH=str(tmp_path)))   # the host's own is ignored
    finally:
        target.kill()
        target.wait()
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["scan"]["host"] == os.uname().nodename
    assert [line["pid"] for line in lines[1:]] == [target.pid]
    assert lines[1].get("fault") and "sleep" in lines[1]["cmd"]       # not a Python: py-spy said so
    loaded = set(done.stderr.split())
    assert "mlp_magic.stacks.scan" in loaded
    assert loaded & HEAVY == set()
