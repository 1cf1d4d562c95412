"""Summaries of a value, made on the rank where it lives (``%mpirun --compare``).

A value is walked into leaves: dicts, lists and tuples are opened (up to ``MAX_DEPTH`` levels and
``MAX_LEAVES`` leaves); a torch tensor, a numpy array, a number or any other object is a leaf.
Tensors and arrays are hashed by their bytes, ``CHUNK`` bytes at a time (sha256, which CPUs with
SHA extensions run at about 1.5 GB/s; hashlib releases the GIL): each chunk keeps an 8-byte digest,
so two ranks can later find which chunks of a leaf differ without moving the leaf (and then which
1 KiB pieces of those chunks: ``values/rank/compare.py``). A GPU tensor is
copied to the host ``BLOCK`` bytes at a time, so memory stays low. Numbers compare by their exact
``repr``; anything else by the hash of its ``repr`` (two objects whose reprs are equal are equal).

torch and numpy are never imported here: a value can only be a tensor if torch is loaded already.
"""
from __future__ import annotations

import hashlib
import math
import sys

CHUNK = 1 << 16        # bytes per chunk digest (8 bytes kept: 1/8192 of the data); itemsizes divide it
BLOCK = 16 << 20       # bytes copied off a GPU (and checked for nan) at a time; a multiple of CHUNK
WIDTH = 8              # bytes kept of each chunk digest: a false "equal" has odds of 2**-64
MAX_DEPTH = 32
MAX_LEAVES = 100_000
REPR_CHARS = 60        # of a number's or an object's repr shown in summaries


class Leaf:
    """One leaf of a value: where it is, the object, its summary and its chunk digests."""

    __slots__ = ("path", "obj", "summary", "chunks")

    def __init__(self, path: str, obj, summary: dict, chunks: bytes = b""):
        self.path, self.obj, self.summary, self.chunks = path, obj, summary, chunks


class _TooMany(Exception):
    pass


def type_name(obj) -> str:
    kind = type(obj)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def short(text: str) -> str:
    return text if len(text) <= REPR_CHARS else text[:REPR_CHARS - 3] + "..."


def is_tensor(obj) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def is_array(obj) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(obj, numpy.ndarray) and obj.dtype.kind != "O"


def _is_object_array(obj) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(obj, numpy.ndarray) and obj.dtype.kind == "O"


def _is_number(obj) -> bool:
    if isinstance(obj, (bool, int, float, complex)):
        return True
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(obj, (numpy.number, numpy.bool_))


# ------------------------------------------------------------------------------ walking
def _child_path(path: str, key, depth: int) -> str:
    if depth == 0 and isinstance(key, str):
        return key            # a state_dict's keys read as themselves
    return f"{path}[{key!r}]"


def walk(value) -> tuple:
    """value -> ([container descriptions], [(path, leaf object)]), depth first, in order."""
    containers, leaves = [], []
    try:
        _walk(value, "", 0, set(), containers, leaves)
    except _TooMany:
        return [], [("", value)]   # too big to open: compared as one object, by its repr
    return containers, leaves


def state_of(value):
    """A module's or an optimizer's state_dict (their repr shows the structure, not the weights:
    two models with other weights would compare equal by it); None for anything else."""
    if isinstance(value, (dict, list, tuple)) or not callable(getattr(type(value), "state_dict", None)):
        return None
    try:
        state = value.state_dict()
    except Exception:   # not the torch kind of state_dict: compared by repr
        return None
    return state if isinstance(state, dict) else None


def _walk(value, path: str, depth: int, open_ids: set, containers: list, leaves: list) -> None:
    state = state_of(value) if depth < MAX_DEPTH else None
    if state is not None:
        containers.append(f"{path}|{type_name(value)}.state_dict()|{len(state)}")
        value = state
    if not isinstance(value, (dict, list, tuple)) or depth >= MAX_DEPTH or id(value) in open_ids:
        leaves.append((path, value))
        if len(leaves) > MAX_LEAVES:
            raise _TooMany
        return
    open_ids.add(id(value))   # a container holding itself is a leaf the second time
    containers.append(f"{path}|{type_name(value)}|{len(value)}")
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        _walk(item, _child_path(path, key, depth), depth + 1, open_ids, containers, leaves)
    open_ids.discard(id(value))


# ------------------------------------------------------------------------------ leaves
def summarize_leaf(path: str, obj) -> Leaf:
    try:
        if is_tensor(obj) and _plain_tensor(obj):
            return _bytes_leaf(path, obj, "tensor", tensor_bytes(obj))
        if is_array(obj):
            return _bytes_leaf(path, obj, "array", array_bytes(obj))
    except (RuntimeError, TypeError, ValueError):
        pass   # a layout without plain bytes: compared by repr below
    if _is_number(obj):
        return _number_leaf(path, obj)
    return _object_leaf(path, obj)


def _plain_tensor(tensor) -> bool:
    import torch

    return tensor.layout is torch.strided and not tensor.is_meta and not tensor.is_quantized


def _number_leaf(path: str, obj) -> Leaf:
    value = obj.item() if hasattr(obj, "item") else obj
    text = repr(value)
    finite = math.isfinite(abs(value)) if isinstance(value, (float, complex)) else None
    digest = hashlib.sha256(f"number|{type_name(obj)}|{text}".encode()).hexdigest()[:2 * WIDTH]
    return Leaf(path, obj, {"path": path, "kind": "number", "type": type_name(obj), "value": value,
                            "repr": short(text), "finite": finite, "digest": digest})


def _object_leaf(path: str, obj) -> Leaf:
    try:
        # an object array's repr elides its middle ("..."): the digest reads every element
        text = repr(obj.tolist()) if _is_object_array(obj) else repr(obj)
    except Exception as exc:   # a broken __repr__ still gets compared, by its failure
        text = f"<repr failed: {type(exc).__name__}>"
    digest = hashlib.sha256(f"object|{type_name(obj)}|{text}".encode(errors="replace")).hexdigest()
    return Leaf(path, obj, {"path": path, "kind": "object", "type": type_name(obj),
                            "repr": short(text), "finite": None, "digest": digest[:2 * WIDTH]})


def _bytes_leaf(path: str, obj, kind: str, source) -> Leaf:
    """Hash a tensor's or an array's bytes chunk by chunk, checking for nan and inf on the way."""
    dtype, shape, device, floating, blocks = source
    finite = True if floating else None
    digests = []
    for host, block_finite in blocks:
        if floating and finite:
            finite = block_finite()
        view = memoryview(host)
        digests += [hashlib.sha256(view[at:at + CHUNK]).digest()[:WIDTH] for at in range(0, len(view), CHUNK)]
    chunks = b"".join(digests)
    header = f"{kind}|{dtype}|{list(shape)}|".encode()
    nbytes = obj.nbytes if kind == "array" else obj.numel() * obj.element_size()
    summary = {"path": path, "kind": kind, "type": type_name(obj), "shape": list(shape), "dtype": dtype,
               "device": device, "finite": finite, "numel": _numel(shape), "nbytes": nbytes,
               "digest": hashlib.sha256(header + chunks).hexdigest()[:2 * WIDTH]}
    return Leaf(path, obj, summary, chunks)


def _numel(shape) -> int:
    return math.prod(int(n) for n in shape)


def tensor_flat(tensor):
    """The tensor as a flat, contiguous tensor of its own dtype, on its own device (a copy only
    when it is not contiguous)."""
    return tensor.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)


def tensor_bytes(tensor) -> tuple:
    """(dtype, shape, device, floating, blocks): blocks yield (host bytes, finite check) pairs."""
    import torch

    flat = tensor_flat(tensor)
    raw = flat.view(torch.uint8)
    size = tensor.element_size()
    floating = tensor.is_floating_point() or tensor.is_complex()

    def blocks():
        for at in range(0, raw.numel(), BLOCK):
            block = raw[at:at + BLOCK]
            values = flat[at // size:(at + BLOCK) // size]
            yield block.cpu().numpy(), lambda values=values: bool(torch.isfinite(values).all())
    dtype = str(tensor.dtype).replace("torch.", "")
    return dtype, tuple(tensor.shape), str(tensor.device), floating, blocks()


def array_flat(array):
    import numpy

    return numpy.ascontiguousarray(array).reshape(-1)


def array_bytes(array) -> tuple:
    import numpy

    flat = array_flat(array)
    raw = flat.view(numpy.uint8)
    size = array.dtype.itemsize
    floating = array.dtype.kind in "fc"

    def blocks():
        for at in range(0, raw.size, BLOCK):
            values = flat[at // size:(at + BLOCK) // size]
            yield raw[at:at + BLOCK], lambda values=values: bool(numpy.isfinite(values).all())
    return str(array.dtype), array.shape, "cpu", floating, blocks()


# ------------------------------------------------------------------------------ the whole value
def summarize(value) -> tuple:
    """value -> (summary of the whole value, [Leaf])."""
    containers, found = walk(value)
    leaves = [summarize_leaf(path, obj) for path, obj in found]
    whole = hashlib.sha256(f"{type_name(value)}|".encode())
    structure = hashlib.sha256("\n".join(containers).encode(errors="replace"))
    counts: dict = {}
    dtypes, devices, finite, nbytes, numel = [], [], None, 0, 0
    for leaf in leaves:
        s = leaf.summary
        whole.update(f"{s['path']}|{s['digest']}\n".encode(errors="replace"))
        structure.update(f"\n{s['path']}|{s['kind']}|{s['type']}|{s.get('shape')}|{s.get('dtype')}"
                         .encode(errors="replace"))
        counts[s["kind"]] = counts.get(s["kind"], 0) + 1
        if s.get("dtype") and s["dtype"] not in dtypes and len(dtypes) < 4:
            dtypes.append(s["dtype"])
        kind_of_device = s.get("device", "").split(":")[0]
        if kind_of_device and kind_of_device not in devices and len(devices) < 4:
            devices.append(kind_of_device)
        if s["finite"] is not None:
            finite = s["finite"] if finite is None else finite and s["finite"]
        nbytes += s.get("nbytes", 0)
        numel += s.get("numel", 0)
    one = leaves[0].summary if len(leaves) == 1 and leaves[0].path == "" else None
    summary = {"type": type_name(value), "digest": whole.hexdigest()[:2 * WIDTH],
               "structure": structure.hexdigest()[:2 * WIDTH], "leaves": len(leaves), "counts": counts,
               "dtypes": dtypes, "devices": devices, "finite": finite, "numel": numel, "nbytes": nbytes,
               "leaf": one, "nested": len(containers) > 1}
    return summary, leaves
