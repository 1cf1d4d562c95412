"""The suite on two xdist workers (setup.cfg's `-n 2`; `-n 0` for one process): which tests go
together, and which need the machine to themselves.

Most of a test's time here is waiting (a World starting, a grace running out, a host
answering), so two workers sharing the 2 cores take well under the time one does
(docs/explanation/development.md). What must not run twice at once stays on one worker, a scope
of the scheduler (``make_scheduler``):
- a test file's tests stay together (its module fixtures, its World, are made once);
- every test of the network-namespace hosts (the ``testbed``: fixed names and addresses), and
  the browser tier with them: one after the other, never beside each other (a bed module's World
  of 64 ranks lives between its tests, and the browser tests time their screens: in one CI
  rehearsal, with them on two workers, both failed).
The scopes are told from node ids alone (the controller collects nothing), so a test that uses
the bed outside those files is refused at collection (``check_bed_scope``). xdist's own
``--dist loadgroup`` reads marks through a node id it rewrites, which pytest 9.2 no longer
allows (pytest-xdist issue 1386): it silently stopped grouping.
A test marked ``alone`` runs while the other worker runs nothing: those that time a sub-second
wait, those that count processes machine-wide, and one whose failures came only under the other
worker's load (its comment says how, until the cause is found). The whole browser tier runs alone
(``runs_alone``): under the other worker's load, JupyterLab's theme stylesheet missed its load
time (an "Error Loading Theme Stylesheet" dialog over the page), and its long-task budgets are
timed.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile

import pytest

BED = "testbed"
BED_FILES = ("tests/notebook/test_platform_notebook.py",)   # beside tests/multihost/


def scope_of(nodeid: str) -> str:
    """The scheduler's scope of a test: the bed's (the browser tier's too), else its file's."""
    path = nodeid.split("::")[0]
    if path.startswith(("tests/multihost/", "tests/browser/")) or path in BED_FILES:
        return BED
    return path


def make_scheduler(config, log):
    """xdist's scheduler by scope, with ``scope_of``'s scopes."""
    from xdist.scheduler import LoadScopeScheduling

    class ByScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ByScope(config, log)


def runs_alone(item: pytest.Item) -> bool:
    """Whether ``item`` needs the machine to itself: marked ``alone``, or of the browser tier."""
    return item.get_closest_marker("alone") is not None or item.nodeid.startswith("tests/browser/")


def check_bed_scope(item: pytest.Item) -> None:
    """A test using the bed must be in the bed's scope, or two workers would each start one."""
    if BED in getattr(item, "fixturenames", ()) and scope_of(item.nodeid) != BED:
        raise pytest.UsageError(f"{item.nodeid} uses the namespace hosts: move it under tests/multihost/ "
                                "or name its file in tests/workers.BED_FILES")


def _lock_folder(controller_pid: int) -> str:
    """Where the workers of the run that ``controller_pid`` drives keep their locks."""
    return os.path.join(tempfile.gettempdir(), f"mlp-magic-tests-{os.getuid()}-{controller_pid}")


class MachineShare:
    """A worker's hold on the machine while its tests run (set-up to tear-down): shared with the
    other worker's test, or, for an ``alone`` test, its own. A readers-writer lock on two files:
    the turnstile keeps a waiting ``alone`` test from being starved by the other worker's next
    tests. A run of ``alone`` tests (the browser tier) keeps the machine from the first to the
    last: given back between them, it had the tier wait, test after test, for whatever the other
    worker was in the middle of."""

    def __init__(self):
        self._files: tuple | None = None   # (turnstile, machine) while held
        self._alone = False

    def take(self, alone: bool) -> None:
        if self._files is not None and alone and self._alone:
            return   # still ours, from the alone test before
        self.give_back()
        if os.environ.get("PYTEST_XDIST_WORKER") is None:   # one process: nothing to share
            return
        folder = _lock_folder(os.getppid())   # a worker is its controller's child (execnet's popen)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        turnstile = open(os.path.join(folder, "turnstile"), "a")
        machine = open(os.path.join(folder, "machine"), "a")
        self._files, self._alone = (turnstile, machine), alone
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(machine, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(turnstile, fcntl.LOCK_UN)

    def give_back(self) -> None:
        if self._files is not None:
            for handle in reversed(self._files):   # (closing a file lets go of its lock)
                handle.close()
            self._files = None


SHARE = MachineShare()


@contextlib.contextmanager
def machine_share(alone: bool, keep: bool = False):
    """``SHARE`` held while the block runs; ``keep``: not given back after it (the next test runs
    alone too)."""
    SHARE.take(alone)
    try:
        yield
    finally:
        if not keep:
            SHARE.give_back()


def remove_locks() -> None:
    """At the controller's end, every worker gone: the lock folder goes."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        shutil.rmtree(_lock_folder(os.getpid()), ignore_errors=True)
