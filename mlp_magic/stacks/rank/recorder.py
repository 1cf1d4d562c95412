"""In each rank: PyTorch's flight recorder on by default, and a thread that writes what it
recorded when the kernel asks (``COLLECTIVES_SIGNAL``, engine/side_signal), even while the main
thread waits in a collective.

The recorder keeps each process group's collectives with their sequence numbers (gloo's too, in
the torch we test with). The answer is ``stacks/pure/recorded.slim`` of its dump: a few
entries per group, written whole (a temporary file renamed) so the kernel never reads half of
one. A rank with no process group, or a torch without the recorder, answers no groups.

Private torch names used, each guarded (without them: no groups, or every group of the dump):
``torch._C._distributed_c10d._dump_fr_trace_json`` (``_dump_nccl_trace_json`` before it),
``distributed_c10d._world.pg_names``, ``ProcessGroup._get_sequence_number_for_group``.
"""
from __future__ import annotations

import json
import os
import sys

from mlp_magic.engine.identity import collectives_path
from mlp_magic.engine.private_files import open_private
from mlp_magic.engine.side_signal import COLLECTIVES_SIGNAL, on_signal
from mlp_magic.stacks.pure.recorded import entered, slim

# The recorder's size: the name torch reads now, then the older NCCL-only one. The user's
# setting of either wins; ours keeps a long loop's recent collectives (a ring: older ones go).
BUFFER_VARIABLES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
DEFAULT_ENTRIES = 2000
DUMPS = ("_dump_fr_trace_json", "_dump_nccl_trace_json")   # private torch names, newest first


def turn_on(environ=os.environ) -> bool:
    """Size the recorder unless the user did; read by torch when its first group is made, so
    this runs before any cell. True when ours is the setting."""
    if any(environ.get(name) for name in BUFFER_VARIABLES):
        return False
    environ[BUFFER_VARIABLES[0]] = str(DEFAULT_ENTRIES)
    return True


def install() -> bool:
    """Answer ``COLLECTIVES_SIGNAL`` (engine/side_signal), once per process; True when in place.
    (A World's ranks answer it through engine/bootstrap, which imports this module only when
    the signal first comes.)"""
    return on_signal(COLLECTIVES_SIGNAL, answer, "mlp-collectives")


def answer() -> None:
    """What ``COLLECTIVES_SIGNAL`` does: the recorder's state, where the kernel reads it."""
    write_answer(collectives_path())


def recorded() -> dict:
    """The recorder's dump, slimmed; no groups where torch.distributed was never imported, has
    no group, or its torch has no recorder (nothing to report, nothing to fail)."""
    raw = _dump()
    return {"groups": []} if raw is None else slim(raw, live_groups())


def entered_since(since_ns: int) -> list:
    """The collectives this rank entered since ``since_ns`` (``time.time_ns()``), each
    ``{"group", "seq", "op", "t"}``: none without a group or a recorder (%%mpirun --profile)."""
    raw = _dump()
    return [] if raw is None else entered(raw, since_ns)


def _dump() -> dict | None:
    """The recorder's whole document, or None (no torch.distributed, no group, no recorder)."""
    dist = sys.modules.get("torch.distributed")   # never imported here: a rank without torch stays so
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    c10d = sys.modules.get("torch._C._distributed_c10d")
    dump = next((getattr(c10d, name) for name in DUMPS if hasattr(c10d, name)), None)
    if dump is None:
        return None
    return json.loads(dump(includeCollectives=True, onlyActive=False))


def live_groups() -> dict | None:
    """{name: {"desc", "seq"}} of this rank's process groups now (``seq``: its collectives so far,
    None where torch does not say); None where this torch hides them (the dump's groups are
    then all reported, destroyed ones too)."""
    try:
        from torch.distributed import distributed_c10d as c10d

        groups = dict(c10d._world.pg_names)
    except (ImportError, AttributeError):
        return None
    live = {}
    for group, name in groups.items():
        try:
            seq = int(group._get_sequence_number_for_group())
        except (AttributeError, RuntimeError, TypeError, ValueError):
            seq = None
        live[str(name)] = {"desc": str(getattr(group, "group_desc", "") or ""), "seq": seq}
    return live


def write_answer(path: str) -> None:
    try:
        answer = recorded()
    except Exception as err:  # noqa: BLE001 - a dump that fails is said, not a missing answer
        answer = {"groups": [], "error": f"{type(err).__name__}: {err}"}
    temporary = f"{path}.{os.getpid()}.tmp"
    with open_private(temporary) as file:
        json.dump(answer, file)
    os.replace(temporary, path)
