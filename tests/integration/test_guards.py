"""When an internal we reach into is gone (an upgrade moved it), a real World falls back to plain
ipyparallel behaviour, says so once, and loses no output (issue 24, "internals behind a guard").

The upgrade is played by renaming what our guard looks for (client/ipp_private.REPLY_HOOKS,
engine/ipykernel_private's names, through a sitecustomize in the engines), so the real check
runs and finds nothing, on real engines under real mpiexec. The renaming is done in the session's
kernel, where the World is started (``in_kernel.setattr``), and undone after the test.
"""
from __future__ import annotations

import importlib

import pytest

from mlp_magic.errors import RankFailure
from tests import worlds
from mlp_magic.world import guards
from mlp_magic.client import ipp_private

from tests.integration.conftest import run

pytestmark = pytest.mark.timeout(240)

CELL = ("%%mpirun -np 2 --oversubscribe -o out\n"
        "import os, sys\n"
        "print('out of rank', rank)\n"
        "print('err of rank', rank, file=sys.stderr)\n"
        "rank * 10")


def _swap(module: str, name: str, value):
    """In the kernel: ``module.name`` set to ``value``; what it was."""
    found = importlib.import_module(module)
    old = getattr(found, name)
    setattr(found, name, value)
    return old


class KernelPatch:
    """``monkeypatch.setattr`` in the session's kernel: each attribute set back at the end."""

    def __init__(self, ip):
        self.ip, self.undo = ip, []

    def setattr(self, module, name: str, value) -> None:
        self.undo.append((module.__name__, name, self.ip.call(_swap, module.__name__, name, value)))

    def restore(self) -> None:
        while self.undo:
            self.ip.call(_swap, *self.undo.pop())


@pytest.fixture
def in_kernel(ip):
    patch = KernelPatch(ip)
    yield patch
    patch.restore()


@pytest.fixture
def fresh(ip, in_kernel):
    run(ip, "%mpirun --stop")
    in_kernel.setattr(guards, "_said", set())
    yield ip
    run(ip, "%mpirun --stop")


def _outputs_kept(ip, capsys) -> str:
    """Output, errors, a silent cell and durations as ever; what was printed."""
    assert run(ip, CELL) is None
    shown = capsys.readouterr()
    result = ip.user_ns["out"]
    assert [result[r].stdout for r in (0, 1)] == ["out of rank 0\n", "out of rank 1\n"]
    assert [result[r].stderr for r in (0, 1)] == ["err of rank 0\n", "err of rank 1\n"]
    assert all(result[r].duration is not None and result[r].duration >= 0 for r in (0, 1))
    assert run(ip, "%%mpirun -o quiet\nx = rank") is None   # published nothing: no hang
    assert [ip.user_ns["quiet"][r].stdout for r in (0, 1)] == ["", ""]
    failed = run(ip, "%%mpirun\n1 / (rank - 1)")
    assert isinstance(failed, RankFailure)
    later = capsys.readouterr()
    assert "ZeroDivisionError" in later.out + later.err
    return shown.out + shown.err + later.out + later.err


def test_a_client_without_its_reply_hooks_gets_plain_replies_and_every_output(
        fresh, in_kernel, capsys):
    in_kernel.setattr(ipp_private, "REPLY_HOOKS", ("_reply_handlers", "_output_futures"))
    printed = _outputs_kept(fresh, capsys)
    assert printed.count(guards.PLAIN_REPLIES) == 1
    # the engines publish as plain ipykernel does: nothing of engine/quiet is left in them
    assert run(fresh, "%%mpirun -o left\nfrom mlp_magic.engine import ipykernel_private as p\n"
                      "print(len(p._REPLACED))") is None
    assert [fresh.user_ns["left"][r].stdout for r in (0, 1)] == ["0\n", "0\n"]
    run(fresh, "%mpirun --restart")
    assert run(fresh, "%%mpirun\nprint(rank)") is None
    assert guards.PLAIN_REPLIES not in capsys.readouterr().out   # said once per kernel
    assert worlds.current_world().alive()


SITECUSTOMIZE = """
import os
os.environ.pop("PYTEST_CURRENT_TEST", None)   # ipykernel watches fd 1/2 only outside pytest
from mlp_magic.engine import ipykernel_private
ipykernel_private.KERNEL_HOOKS = (*ipykernel_private.KERNEL_HOOKS, "_publish_status_v2")
ipykernel_private.FD_PIPE = (*ipykernel_private.FD_PIPE, "_fid_v2")
"""


def test_an_ipykernel_without_the_hooks_keeps_its_own_ways_and_every_output(
        fresh, tmp_path, monkeypatch, capsys):
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    printed = _outputs_kept(fresh, capsys)
    lines = [line for line in printed.splitlines() if "this ipykernel has no" in line]
    assert lines == ["mlp_magic: ranks 0-1 (2) on localhost: this ipykernel has no "
                     "Kernel._publish_status_v2, "
                     "OutStream._fid_v2, so ipykernel's own behaviour is kept there for: quiet replies "
                     "(engine/quiet); fd 1/2 output drained at its cell's end (engine/fd_watch) "
                     "(more messages or later fd output; nothing is lost)"]
    # fd output still reaches the notebook, through ipykernel's own reader
    cell = "%%mpirun -o fd\nimport os, time\nos.system('echo below python')\ntime.sleep(0.5)"
    assert run(fresh, cell) is None
    assert [fresh.user_ns["fd"][r].stdout for r in (0, 1)] == ["below python\n"] * 2


def test_without_the_control_request_an_interrupt_reaches_every_rank_as_a_signal(
        fresh, in_kernel, capsys):
    in_kernel.setattr(ipp_private, "CONTROL_REQUEST", "_send_control_request_v10")
    assert run(fresh, "%%mpirun -np 2 --oversubscribe\npass") is None
    failed = run(fresh, "%%mpirun --timeout 2 -o slow\nimport time\ntime.sleep(60)")
    assert "timeout on ranks 0-1" in str(failed)
    assert [r.status for r in fresh.user_ns["slow"]] == ["timeout", "timeout"]
    printed = capsys.readouterr().out
    assert "World is still usable" in printed and printed.count(guards.SIGNALLED) == 1
    assert run(fresh, "%%mpirun -o after\nprint('next cell works')") is None
    assert {r.stdout for r in fresh.user_ns["after"]} == {"next cell works\n"}
