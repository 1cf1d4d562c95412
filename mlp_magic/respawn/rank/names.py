"""In each rank, for ``%mpirun --respawn --copy NAMES``: the user's names a rank holds, and the
named values packed together on a live rank and unpacked on the new ones.

The names travel in one pickle, so what they share stays shared: an optimizer copied with its
model holds the copied model's parameters, not copies of its own. Tensors travel where they are
(a new rank stands on the same host and GPU as the dead one).
"""
from __future__ import annotations

from mlp_magic.engine.bootstrap import engine_shell
from mlp_magic.values.rank.compare import error_line
from mlp_magic.values.pure.compare import size_text
from mlp_magic.values.rank.transfer import Packed, Refused, data_bytes

OWN = frozenset({"In", "Out", "exit", "quit", "get_ipython", "input"})   # IPython's and the World's own


def held_names() -> list:
    """The names this rank's cells made (IPython's own and ``_`` names left out); the modules
    among them as ``+name``, after the others: a cell run again imports those, --copy has no use
    for them."""
    import types

    shell = engine_shell()
    hidden = getattr(shell, "user_ns_hidden", {})
    names = sorted(name for name in shell.user_ns
                   if not name.startswith("_") and name not in hidden and name not in OWN)
    modules = [name for name in names if isinstance(shell.user_ns[name], types.ModuleType)]
    return [name for name in names if name not in modules] + [f"+{name}" for name in modules]


def pack_names(names: list, cap: int):
    """The values of ``names`` in one pickle (Packed), or Refused: a name not defined here, more
    than ``cap`` bytes in all, or not serialisable."""
    from ipyparallel.serialize import serialize_object

    namespace = engine_shell().user_ns
    missing = [name for name in names if name not in namespace]
    if missing:
        return Refused(f"{', '.join(missing)} not defined on this rank")
    values = {name: namespace[name] for name in names}
    if data_bytes(values) > cap:
        return Refused(f"{', '.join(names)} hold {size_text(data_bytes(values))} of data, over the cap of "
                       f"{size_text(cap)} (MLP_MAGIC_PULL_CAP)")
    try:
        buffers = serialize_object((values,))
    except Exception as exc:
        return Refused(f"{', '.join(names)} cannot be pickled: {error_line(exc)}")
    size = sum(memoryview(buffer).nbytes for buffer in buffers)
    if size > cap:
        return Refused(f"{', '.join(names)} pickle to {size_text(size)}, over the cap of {size_text(cap)} "
                       "(MLP_MAGIC_PULL_CAP)")
    kinds = ", ".join(type(value).__qualname__ for value in values.values())
    return Packed([bytes(buffer) for buffer in buffers], kinds)


def unpack_names(packed) -> list:
    """Put the packed values in this rank's namespace; their names."""
    from ipyparallel.serialize import deserialize_object

    values = deserialize_object(list(packed.buffers))[0][0]
    engine_shell().user_ns.update(values)
    return sorted(values)
