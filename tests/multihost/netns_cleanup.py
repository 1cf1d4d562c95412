"""Tearing a test bed down (tests/multihost/netns.py): its namespaces' processes, its links,
its ssh masters and work folders, also those a killed run left behind."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time

from tests.procs import live_cmdline

PREFIX = "mlpt-"
BRIDGE = PREFIX + "br0"
ETC_NETNS = "/etc/netns"
BED_DIR_PREFIX = os.path.join(tempfile.gettempdir(), "mlpt-bed-")


def _ip(*args: str, check: bool = True, timeout: float = 10.0) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def namespace_pids(netns: str) -> list[int]:
    done = _ip("netns", "pids", netns, check=False)
    return [int(p) for p in done.stdout.split() if p.isdigit()] if done.returncode == 0 else []


def kill_namespace_processes(netns: str, wait: float = 5.0) -> None:
    """TERM, then KILL, every process in a test-bed namespace (all of them are the bed's sshds
    and the sessions they serve)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in namespace_pids(netns):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while namespace_pids(netns) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not namespace_pids(netns):
            return


def _test_bed_ssh_masters() -> list[int]:
    """ssh ControlMaster processes serving a test bed's control directory (titled "ssh: PATH")."""
    return [int(entry) for entry in os.listdir("/proc")
            if entry.isdigit() and (live_cmdline(int(entry)) or "").startswith(f"ssh: {BED_DIR_PREFIX}")]


def clear_leftovers() -> None:
    """Remove every mlpt- namespace, veth and bridge, test-bed ssh masters and work directories:
    the current bed's at teardown, or those of a run killed before its teardown (the caller
    holds the test-bed lock, so none of them is in use)."""
    for pid in _test_bed_ssh_masters():
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    parent = os.path.dirname(BED_DIR_PREFIX)
    for name in os.listdir(parent):
        path = os.path.join(parent, name)
        if path.startswith(BED_DIR_PREFIX):
            shutil.rmtree(path, ignore_errors=True)
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    for netns in (line.split()[0] for line in listed if line.startswith(PREFIX)):
        kill_namespace_processes(netns)
        _ip("netns", "del", netns, check=False)
    links = _ip("-o", "link", "show", check=False).stdout.splitlines()
    for line in links:
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(PREFIX) and name != BRIDGE:
            _ip("link", "del", name, check=False)
    _ip("link", "del", BRIDGE, check=False)
    if os.path.isdir(ETC_NETNS):
        for name in os.listdir(ETC_NETNS):
            if name.startswith(PREFIX):
                shutil.rmtree(os.path.join(ETC_NETNS, name), ignore_errors=True)
        if not os.listdir(ETC_NETNS):
            os.rmdir(ETC_NETNS)
