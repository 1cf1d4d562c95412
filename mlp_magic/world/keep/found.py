"""The Worlds of this user on this machine, as their records say (world/published): found by
``%mpirun --attach``, listed by ``mlp-magic worlds``, stopped by ``mlp-magic stop ID``."""
from __future__ import annotations

import json
import os
import pwd

import psutil

from mlp_magic import config
from mlp_magic.errors import MlpMagicError
from mlp_magic.world import published
from mlp_magic.world.keep import keeper
from mlp_magic.world.pure.worlds_table import worlds_table

LISTED = "`mlp-magic worlds` lists them"


def worlds(directory: str | None = None) -> list:
    return published.read_worlds(directory or config.state_dir())


def find(world_id: str | None, directory: str | None = None) -> dict:
    """The record of World ``world_id`` (its id, or the start of it); without one, the only World
    there is. One error line otherwise."""
    directory = directory or config.state_dir()
    found = worlds(directory)
    if world_id:
        matches = [r for r in found if r.get("id") == world_id] or \
                  [r for r in found if str(r.get("id", "")).startswith(world_id)]
        if not matches:
            raise MlpMagicError(f"no World {world_id!r} on this machine: {LISTED}")
        if len(matches) > 1:
            raise MlpMagicError(f"{world_id!r} is the start of {len(matches)} Worlds' ids: give more of it")
        return _ours(matches[0], directory)
    if len(found) == 1:
        return _ours(found[0], directory)
    if not found:
        raise MlpMagicError(f"no World to attach to on this machine ({LISTED})")
    raise MlpMagicError(f"{len(found)} Worlds on this machine: give the id of one\n{worlds_table(found)}")


def _ours(record: dict, directory: str) -> dict:
    """``record``, when this user owns it; else one line naming its owner."""
    try:
        owner = os.stat(published.record_path(record["pid"], directory, record.get("host"))).st_uid
    except OSError:
        raise MlpMagicError(f"World {record.get('id')} is gone") from None
    if owner != os.getuid():
        raise MlpMagicError(f"World {record.get('id')} belongs to {_user(owner)}: only they can "
                            "attach to it or stop it")
    if not published.private_part(record).get("workdir"):
        raise MlpMagicError(f"World {record.get('id')} was started by an mlp_magic that cannot be "
                            "attached to (its record names no folder)")
    return record


def _user(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"user id {uid}"


def kernel_name(pid: int) -> str:
    """How a line names a kernel: its pid, and its connection file when it is a Jupyter kernel."""
    try:
        words = psutil.Process(pid).cmdline()
    except psutil.Error:
        return f"pid {pid}"
    files = [os.path.basename(w) for w in words if w.endswith(".json") and "kernel" in w]
    return f"pid {pid}" + (f" ({files[0]})" if files else "")


def stop(record: dict, directory: str | None = None) -> int:
    """Stop the World ``record`` names (its keeper leaves with its folder): processes signalled."""
    directory = directory or config.state_dir()
    path = published.record_path(record["pid"], directory, record.get("host"))
    return keeper.stop_world(published.private_part(record)["workdir"], path)


# ---------------------------------------------------------------------------- mlp-magic
def run_worlds(options) -> int:
    found = worlds()
    print(json.dumps([{key: value for key, value in r.items() if key not in ("private", "agents")}
                      for r in found], indent=2) if options.json else worlds_table(found))
    return 0


def run_stop(options) -> int:
    if not options.world_id:
        raise MlpMagicError(f"stop: give the id of the World to stop ({LISTED})")
    record = find(options.world_id)
    stopped = stop(record)
    print(f"stopped World {record['id']} ({record.get('np')} ranks; {stopped} processes signalled)")
    return 0
