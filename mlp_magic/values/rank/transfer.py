"""What ``%mpirun --pull`` and ``--push`` run inside each rank.

Values travel in ipyparallel's own serialisation (pickle, large numpy buffers out of band,
interactively defined functions canned): what ``view.pull`` and ``view.push`` would move. A pulled
value is serialised here, once, so its size is checked against the cap before anything is sent,
and it travels as opaque bytes (``Packed``): the kernel unpacks it itself, because a value that
cannot be loaded there (a class defined only on the ranks) would otherwise fail inside
ipyparallel's receiving thread, and that reply would never arrive. The value travels inside a
1-tuple both ways: ipyparallel sorts the keys of a dict it is given at the top (its own push
reorders dicts), and a tuple's items keep their order and their out-of-band buffers.
"""
from __future__ import annotations

import copy

from mlp_magic.values.pure.compare import size_text
from mlp_magic.engine.bootstrap import engine_shell
from mlp_magic.values.rank.summaries import MAX_DEPTH, is_array, is_tensor, state_of, type_name
from mlp_magic.values.rank.compare import error_line


class Packed:
    """A serialised value: ipyparallel's buffers, as bytes."""

    def __init__(self, buffers: list, type_name: str):
        self.buffers, self.type_name = buffers, type_name

    @property
    def nbytes(self) -> int:
        return sum(len(buffer) for buffer in self.buffers)


class Refused:
    """A rank's answer when its value cannot be sent: the kernel shows ``message``."""

    def __init__(self, message: str):
        self.message = message

    def __repr__(self) -> str:
        return f"Refused({self.message!r})"


def on_cpu(value, depth: int = 0):
    """``value`` with every GPU tensor (also inside dicts, lists and tuples) copied to the CPU;
    containers are rebuilt only where something moved."""
    if is_tensor(value):
        return value.detach().cpu() if value.device.type != "cpu" else value
    if depth >= MAX_DEPTH or not isinstance(value, (dict, list, tuple)):
        return value
    if isinstance(value, dict):
        moved = {k: on_cpu(v, depth + 1) for k, v in value.items()}
        if all(moved[k] is v for k, v in value.items()):
            return value
        rebuilt = copy.copy(value)      # keeps the dict's type (OrderedDict, defaultdict...)
        rebuilt.update(moved)
        return rebuilt
    items = [on_cpu(v, depth + 1) for v in value]
    if all(a is b for a, b in zip(items, value)):
        return value
    if isinstance(value, list):
        return type(value)(items) if type(value) is not list else items
    return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)


def data_bytes(value, depth: int = 0) -> int:
    """The bytes of the tensors and arrays in ``value``: a size known before serialising it."""
    if is_tensor(value):
        return value.numel() * value.element_size()
    if is_array(value):
        return value.nbytes
    state = state_of(value) if depth < MAX_DEPTH else None
    if state is not None:   # a module: its parameters and buffers
        return data_bytes(state, depth + 1)
    if depth >= MAX_DEPTH or not isinstance(value, (dict, list, tuple)):
        return 0
    items = value.values() if isinstance(value, dict) else value
    return sum(data_bytes(v, depth + 1) for v in items)


def _module_device(value):
    """The device of a module's tensors that are not on the CPU, or None: a module is pickled
    with its tensors where they are, and moving it here would change the rank's own model."""
    state = state_of(value)
    if state is None or isinstance(value, dict):
        return None
    for tensor in state.values():
        if is_tensor(tensor) and tensor.device.type != "cpu":
            return str(tensor.device)
    return None


def _over_cap(name: str, size: int, cap: int) -> Refused:
    return Refused(f"{name} is {size_text(size)}, over the pull cap of {size_text(cap)} per rank "
                   "(MLP_MAGIC_PULL_CAP)")


def size_of(name: str) -> int | None:
    """The bytes of ``name``'s tensors and arrays on this rank (None: not defined), for the
    kernel's check of the total before anything is sent."""
    namespace = engine_shell().user_ns
    return data_bytes(namespace[name]) if name in namespace else None


def fetch(name: str, cap: int):
    """The rank's ``name``, serialised (Packed), or Refused: not defined, over ``cap`` bytes, or
    not serialisable."""
    from ipyparallel.serialize import serialize_object

    namespace = engine_shell().user_ns
    if name not in namespace:
        return Refused(f"NameError: name {name!r} is not defined")
    if data_bytes(namespace[name]) > cap:       # refused before copying anything
        return _over_cap(name, data_bytes(namespace[name]), cap)
    device = _module_device(namespace[name])
    if device is not None:
        return Refused(f"{name} is a {type_name(namespace[name])} on {device}, which would come back on "
                       f"{device}: pull its weights instead (a cell: `{name}_sd = {{k: v.cpu() for k, v in "
                       f"{name}.state_dict().items()}}`, then %mpirun --pull {name}_sd)")
    try:
        buffers = serialize_object((on_cpu(namespace[name]),))
    except Exception as exc:
        return Refused(f"{name} is a {type_name(namespace[name])} that cannot be pickled: {error_line(exc)}")
    size = sum(memoryview(buffer).nbytes for buffer in buffers)
    if size > cap:
        return _over_cap(name, size, cap)
    return Packed([bytes(buffer) for buffer in buffers], type_name(namespace[name]))


def store(name: str, boxed: tuple) -> str:
    """``%mpirun --push``: the notebook's value as cloudpickle wrote it (its out-of-band buffers
    after it), in a 1-tuple; loaded by pickle (cloudpickle's own functions load what it wrote)."""
    import pickle

    head, *buffers = boxed[0]
    value = pickle.loads(head, buffers=buffers)
    engine_shell().user_ns[name] = value
    return type_name(value)
