"""Fixtures of the multi-host suite: a session-wide test bed of namespace hosts with sshd.

``testbed`` (tests/conftest.py: the notebook tier uses it too): 4 hosts (MLPT_HOSTS overrides), up
once per session, torn down at the end even when tests fail. Tests that stop a host use
``testbed.host_down(i)`` (restarted on exit); the ``healthy_testbed`` fixture additionally checks
every host is back up before a test.
"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import netns  # noqa: E402,F401  (the test-bed library next to this file: its tests import it by name)


def pytest_collection_modifyitems(items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.multihost)


@pytest.fixture
def healthy_testbed(testbed):
    """The test bed with every sshd running and every link up."""
    for host in testbed.hosts:
        testbed.set_link(host.index, up=True)
        if not any("sshd" in line for _, line in testbed.processes_on(host.index)):
            testbed.start_sshd(host.index)
    return testbed


@pytest.fixture
def bed(healthy_testbed, monkeypatch):
    """The test bed, with this process's ssh connections kept in the bed's private directory."""
    for key, value in healthy_testbed.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("MLP_MAGIC_SSH", raising=False)
    return healthy_testbed


@pytest.fixture
def two_hosts(ip, healthy_testbed, tmp_path, monkeypatch):
    """The test's shell, a hostfile of two 2-slot workers, and the bed; no World before or after,
    every link up again after."""
    bed = healthy_testbed
    hostfile = str(tmp_path / "hostfile")
    with open(hostfile, "w") as handle:
        handle.write("# two workers, two ranks each\nworker0 slots=2\nworker1 slots=2\n")
    monkeypatch.setenv("MLP_MAGIC_SSH", " ".join(bed.ssh_command()))
    for key, value in bed.env().items():
        monkeypatch.setenv(key, value)
    ip.run_line_magic("mpirun", "--stop")  # never reuse a World from another suite
    yield ip, hostfile, bed
    bed.set_link(1, True)
    ip.run_line_magic("mpirun", "--stop")
