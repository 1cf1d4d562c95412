"""A World's keeper: one small process per World that stops it once no kernel holds it.

A World's processes (controller, launcher, plain engines) are the kernel's children, in sessions
of their own. The keeper is started with them, in its own session too and with no parent-death
signal: it must be able to outlive the kernel. It watches the kernel named in the World's keep
file (``<workdir>/keep.json``, 0600: the owner's pid and start time, whether the World is kept,
its idle limit), woken by the owner's pidfd and at least every ``TICK_S`` (an attach names a new
owner there).

- The owner is gone and the World is not kept: the World is stopped at once (its record names
  every process: world/processes.stop_recorded), as a dead kernel's World always was.
- The owner is gone and the World is kept: the record says since when it has had no kernel; a
  kernel that attaches becomes the owner; ``hours`` later with none, the World is stopped.
- The controller is gone: there is nothing left to keep; the rest is stopped.
- The keep file is gone: the kernel stopped the World itself; the keeper leaves.
- The keep file does not read as one (no owner, no record): the keeper leaves, saying so, and
  stops nothing; the World is then a dead kernel's like any other, for the next reaper.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time

from mlp_magic.machine.process_alive import alive

KEEP_FILE = "keep.json"
TICK_S = 1.0


def keep_path(workdir: str) -> str:
    return os.path.join(workdir, KEEP_FILE)


def write_keep(workdir: str, owner: tuple, kept: bool, hours: float, record: str) -> dict:
    """The keep file, atomically (the keeper never reads half of it), 0600."""
    from mlp_magic.engine.private_files import open_private

    keep = {"owner": list(owner), "kept": kept, "hours": hours, "record": record}
    temporary = keep_path(workdir) + ".tmp"
    with open_private(temporary, "w") as handle:
        json.dump(keep, handle)
    os.replace(temporary, keep_path(workdir))
    return keep


def read_keep(workdir: str) -> dict | None:
    """The keep file, or None when it is gone or does not read as one: an owner (pid, start
    time) and a record's path. Hours that are not a finite number from 0 keep the World no time."""
    from mlp_magic.core.numbers import number
    from mlp_magic.world.pure.record import process_pair

    try:
        with open(keep_path(workdir)) as handle:
            keep = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None
    owner = process_pair(keep.get("owner")) if isinstance(keep, dict) else None
    if owner is None or not isinstance(keep.get("record"), str):
        return None
    hours = keep.get("hours")
    hours = hours if number(hours) is not None and hours >= 0 else 0
    return {"owner": list(owner), "kept": keep.get("kept") is True, "hours": hours, "record": keep["record"]}


def start_keeper(workdir: str) -> subprocess.Popen:
    """The keeper of the World in ``workdir`` (whose keep file is written already)."""
    from mlp_magic.engine.private_files import open_private

    with open_private(os.path.join(workdir, "keeper.log"), "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "mlp_magic.world.keep.keeper", workdir],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)


def _wait_for_end(pid: int, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``pid`` ends first (its pidfd)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        time.sleep(seconds)
        return
    try:
        select.select([fd], [], [], seconds)
    finally:
        os.close(fd)


def _read_record(path: str) -> dict:
    from mlp_magic.world.pure.record import finite_json, sane_record

    try:
        with open(path) as handle:
            record = sane_record(finite_json(handle.read()))
    except (OSError, ValueError, RecursionError):
        return {}
    return record or {}


def _mark_idle(path: str, since: float) -> None:
    """The record says the World has had no kernel since ``since`` (mlp-magic worlds, the panel)."""
    from mlp_magic.world import published

    record = _read_record(path)
    if record and record.get("idle_since") is None:
        record["idle_since"] = published.iso_at(since)
        published.publish(record, os.path.dirname(path))


def stop_world(workdir: str, record_path: str) -> int:
    """Every process the record names, its record and its folder: how many were signalled."""
    from mlp_magic.world import processes, published

    record = _read_record(record_path)
    stopped = processes.stop_recorded(record) if record else 0
    if record.get("pid"):
        published.withdraw(record["pid"], os.path.dirname(record_path))
    shutil.rmtree(workdir, ignore_errors=True)
    return stopped


def keep_watch(workdir: str, clock=time.monotonic) -> str:
    """The keeper's loop; returns why it ended."""
    idle_since = None
    while True:
        keep = read_keep(workdir)
        if keep is None:   # the kernel removes it as it stops the World; a damaged one says nothing
            return "the kernel stopped the World" if not os.path.exists(keep_path(workdir)) \
                else f"{keep_path(workdir)} does not read as a keep file (owner, record): left as it is"
        if alive(keep["owner"]):   # the kernel's own lifeline watches the controller meanwhile
            idle_since = None
            _wait_for_end(keep["owner"][0], TICK_S)
            continue
        why = _why_stop(keep, idle_since := clock() if idle_since is None else idle_since, clock)
        if why:
            stop_world(workdir, keep["record"])
            return why
        time.sleep(TICK_S)


def _why_stop(keep: dict, idle_since: float, clock) -> str:
    """With no kernel: why the World must stop now, or "" while it is kept."""
    if not keep.get("kept"):
        return "its kernel is gone and it was not kept"
    record = _read_record(keep["record"])
    controller = (record.get("processes") or [{}])[0]
    # a controller with no start time was gone when the record was written (world/pure/record)
    if controller.get("create_time") is None or not alive((controller.get("pid"), controller["create_time"])):
        return "its controller is gone"
    _mark_idle(keep["record"], time.time() - (clock() - idle_since))
    if clock() - idle_since >= float(keep.get("hours", 0)) * 3600:
        return f"no kernel attached for {keep.get('hours')} h"
    return ""


def main() -> None:
    workdir = sys.argv[1]
    why = keep_watch(workdir)
    print(f"mlp_magic keeper {os.getpid()}: {why}", flush=True)


if __name__ == "__main__":
    main()
