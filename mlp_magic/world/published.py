"""Kernels publish their World here so the Jupyter server's panel can show it.

One JSON file per kernel process in ``~/.mlp_magic/worlds/`` (``$MLP_MAGIC_STATE_DIR``
overrides), in a folder of mode 0700, each file 0600 (``mkstemp``'s). Writes are atomic (write +
rename) so a reader never sees half a file; files whose process is gone are ignored (and
removed) by readers, so a dead kernel leaves no ghost World.
"""
from __future__ import annotations

import json
import os
import socket
import tempfile
from datetime import datetime, timezone

from mlp_magic import config
from mlp_magic.engine.private_files import private_dirs
from mlp_magic.machine.process_alive import alive
from mlp_magic.world.pure.record import private_part as checked_private
from mlp_magic.world.pure.record import finite_json, process_entries, rank_key, sane_record


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def iso_at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


def record_path(pid: int, directory: str, host: str | None = None) -> str:
    # Host and pid: a shared (NFS) home holds the files of kernels on other machines too.
    return os.path.join(directory, f"{host or socket.gethostname()}-{pid}.json")


def private_folder(directory: str) -> None:
    """``directory`` exists and only its owner can list or enter it (a World's record holds the
    key of its agents), whatever the umask; an older, wider folder of ours is narrowed."""
    private_dirs(directory)
    info = os.stat(directory)
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        os.chmod(directory, 0o700)


def publish(state: dict, directory: str | None = None) -> None:
    """Write the record atomically (a reader never sees half of it), readable by its owner only."""
    directory = directory or config.state_dir()
    private_folder(directory)
    state = dict(state, pid=state.get("pid", os.getpid()), host=state.get("host", socket.gethostname()),
                 updated_at=now_iso())
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as handle:
        json.dump(state, handle)
    os.replace(tmp, record_path(state["pid"], directory, state["host"]))


def withdraw(pid: int | None = None, directory: str | None = None) -> None:
    try:
        os.unlink(record_path(pid or os.getpid(), directory or config.state_dir()))
    except FileNotFoundError:
        pass


def _all_states(directory: str) -> list:
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    states = []
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            with open(os.path.join(directory, name)) as handle:
                state = sane_record(finite_json(handle.read()))
        except (OSError, ValueError, RecursionError):   # RecursionError: nested too deeply
            continue
        if state is not None:
            states.append(state)
    return states


def _here(state: dict) -> bool:
    return state.get("host", socket.gethostname()) == socket.gethostname()


def _kernel_alive(state: dict) -> bool:
    """Whether the record's kernel still runs (a zombie does not: machine/process_alive); the record
    has its pid only."""
    return alive((state["pid"], None))


def _kept_alive(state: dict) -> bool:
    """A kept World whose kernel is gone lives on with its keeper (world/keep/keeper)."""
    keeper = private_part(state).get("keeper")
    return state.get("kept") is True and keeper is not None and alive(keeper)


def read_worlds(directory: str | None = None) -> list:
    """The Worlds of this machine that are held: by their kernel alive, or kept by their keeper
    (a dead kernel's file is left for the reaper; other machines' kernels cannot be checked from
    here). Each says whether its kernel is "alive" or "gone"."""
    worlds = []
    for state in _all_states(directory or config.state_dir()):
        kernel = _here(state) and _kernel_alive(state)
        if kernel or (_here(state) and _kept_alive(state)):
            worlds.append(dict(state, kernel="alive" if kernel else "gone"))
    return worlds


def orphaned_worlds(directory: str | None = None) -> list:
    """States published by this machine's kernels that died without stopping their World (a
    kept World whose keeper lives is not one)."""
    return [s for s in _all_states(directory or config.state_dir())
            if _here(s) and not _kernel_alive(s) and not _kept_alive(s)]


def private_part(record: dict) -> dict:
    """The record's private part (the server's actions use it; never served), its ranks, groups
    and keeper checked (world/pure/record): {} when missing or malformed."""
    return checked_private(record.get("private"))


def recorded_ranks(record: dict) -> dict:
    """{rank: (pid, process start time or None)} of the ranks the record's private part names;
    a malformed entry is left out (a stale or hand-edited file never stops a cleanup)."""
    ranks = private_part(record).get("ranks") or {}
    return {rank_key(rank): tuple(pair) for rank, pair in ranks.items()}


def recorded_groups(record: dict) -> dict:
    """{rank: {"pgid", "sid"}} of the ranks the record's private part names (agent/leftovers)."""
    groups = private_part(record).get("groups") or {}
    return {rank_key(rank): {"pgid": ids[0], "sid": ids[1]} for rank, ids in groups.items()}


def recorded_processes(record: dict) -> list:
    """[(pid, process start time or None)] of the World's own processes (controller, launcher)."""
    return process_entries(record.get("processes"))
