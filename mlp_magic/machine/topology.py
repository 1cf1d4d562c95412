"""The hosts and slots of this environment: core/topology's parsing, given this machine's.

What ``core.topology.topology_of`` takes as values is read here: the process's environment, a
named hostfile (machine/user_files' bounded read: no device, pipe or folder), this machine's
names, and the slots of the embedded default, one per GPU, else one per CPU core.
"""
from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping

from mlp_magic.core.topology import Topology, naming_errors, topology_of
from mlp_magic.machine.names import this_machine_names
from mlp_magic.machine.user_files import read_text as read_user_file

MAX_HOSTFILE_BYTES = 64 << 20   # ~1M hosts' lines: more is not a hostfile


def local_slot_count(gpu_count: Callable[[], int] | None = None) -> int:
    """Slots of the embedded default: one per GPU, else one per CPU core."""
    gpus = gpu_count() if gpu_count else count_local_gpus()
    return gpus or (os.cpu_count() or 1)


def count_local_gpus() -> int:
    """NVIDIA device nodes are the cheapest honest count (no driver load, no subprocess)."""
    try:
        return sum(1 for name in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", name))
    except OSError:
        return 0


def _read_text_file(path: str, what: str = "hostfile") -> str:
    """A hostfile's text, bounded; its own errors name ``what`` (the option) and the path."""
    return read_user_file(path, what, MAX_HOSTFILE_BYTES)


def topology_from_environment(
    env: Mapping | None = None,
    *,
    hostfile: str | None = None,
    hosts: str | None = None,
    read_text: Callable[[str], str] = _read_text_file,
    local_slots: Callable[[], int] = local_slot_count,
    local_names: frozenset | None = None,
) -> Topology:
    """Build the Topology the options and the environment (``os.environ`` unless given)
    describe. ``read_text(path)``: a hostfile's text (a reader of the caller's has its errors
    named by core/topology.naming_errors); ``local_names``: this machine's names
    (``machine.names.this_machine_names()`` unless given); a topology of one of them alone is
    local."""
    return topology_of(
        os.environ if env is None else env,
        hostfile=hostfile,
        hosts=hosts,
        read_text=read_text if read_text is _read_text_file else naming_errors(read_text),
        local_slots=local_slots,
        local_names=this_machine_names() if local_names is None else local_names,
    )
