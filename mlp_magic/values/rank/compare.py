"""What ``%mpirun --compare`` runs inside each rank (the kernel calls these through ipyparallel).

The kernel evaluates nothing itself. ``summarize`` evaluates the expression in the rank's
namespace and answers with a summary of a few hundred bytes; the value and its leaves' chunk
digests stay here until the next cell or comparison (like IPython's ``_``), so the common case,
every rank equal, is one round trip. Only when ranks differ does the kernel ask more, of one rank
per group: the majority's leaf digests (``leaf_digests``); the minority's differing leaves and
their 64 KiB chunk digests (``differences``); for the chunks that differ, the majority's 1 KiB
piece digests (``leaf_details``); the minority's bytes of the pieces that differ
(``differing_pieces``); and, back on the majority's rank, max |a - b| over them
(``max_differences``). A state_dict differing in one element moves one 1 KiB piece.
"""
from __future__ import annotations

import hashlib

from mlp_magic.values.pure.compare import align_paths, differing_slots
from mlp_magic.values.rank import summaries
from mlp_magic.debugging.rank.breakpoints import frame_namespace
from mlp_magic.engine.bootstrap import engine_shell

LISTED = 8               # differing leaves described in detail per group (core.compare.KEYS_SHOWN)
PIECE = 1 << 10          # bytes per piece digest, within a differing chunk
REFINED = 256            # differing chunks per leaf whose pieces are digested (16 MiB of data)
ERROR_CHARS = 300
_kept: dict = {}         # token -> (value, [Leaf]); one comparison at a time


def error_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 3] + "..."


def release(*_) -> None:
    """The next cell (a ``pre_run_cell`` event) or comparison lets the kept value go."""
    _kept.clear()


def summarize(expr: str, token: str) -> dict:
    """Evaluate ``expr`` in the rank's namespace; its summary, or {"error": one line}."""
    release()
    shell = engine_shell()
    if release not in shell.events.callbacks["pre_run_cell"]:
        shell.events.register("pre_run_cell", release)
    namespace = frame_namespace() or (shell.user_ns, None)   # stopped at a breakpoint: its frame
    try:
        value = eval(compile(expr, "<--compare>", "eval"), *namespace)
    except Exception as exc:
        return {"error": error_line(exc)}
    try:
        summary, leaves = summaries.summarize(value)
    except Exception as exc:
        return {"error": f"could not summarize the value: {error_line(exc)}"}
    _kept[token] = (value, leaves)
    return summary


def _leaves(token: str) -> list:
    if token not in _kept:
        raise RuntimeError("the value to compare is gone from this rank (a cell ran in between)")
    return _kept[token][1]


def _digests(leaves: list) -> bytes:
    return b"".join(bytes.fromhex(leaf.summary["digest"]) for leaf in leaves)


def leaf_digests(token: str, with_paths: bool) -> dict:
    """The majority's reference: each leaf's digest (8 bytes each), and the paths when the
    minority's structure differs (else leaves align by index)."""
    leaves = _leaves(token)
    return {"digests": _digests(leaves), "paths": [leaf.path for leaf in leaves] if with_paths else None}


def differences(token: str, reference: dict) -> dict:
    """On a minority rank: which of its leaves differ from the reference (``leaf_digests``).

    {"differing": count, "listed": [(ref index or None, own index, own summary, own chunk digests)],
     "missing": [paths only in the reference, as many as fit in LISTED]}."""
    leaves, width = _leaves(token), summaries.WIDTH
    mine = _digests(leaves)
    if reference["paths"] is None:
        pairs, missing = [(i, i) for i in differing_slots(reference["digests"], mine, width)], []
        extra = []
    else:
        aligned, missing, extra = align_paths(reference["paths"], [leaf.path for leaf in leaves])
        theirs = reference["digests"]
        pairs = [(r, o) for r, o in aligned
                 if theirs[r * width:(r + 1) * width] != mine[o * width:(o + 1) * width]]
    own_index = {leaf.path: i for i, leaf in enumerate(leaves)}
    differ = pairs + [(None, own_index[path]) for path in extra]
    listed = [(r, o, leaves[o].summary, leaves[o].chunks) for r, o in differ[:LISTED]]
    return {"differing": len(differ) + len(missing), "listed": listed,
            "missing": missing[:max(0, LISTED - len(listed))]}


def leaf_details(token: str, others: dict) -> dict:
    """On the majority rank, for {key: (leaf index, a minority's chunk digests or None)}:
    {key: (summary, {chunk: piece digests}, count of chunks that differ)}; pieces are digested
    for at most REFINED differing chunks of a leaf."""
    leaves, found = _leaves(token), {}
    for key, (index, other) in others.items():
        leaf = leaves[index]
        if not other or len(other) != len(leaf.chunks):
            found[key] = (leaf.summary, {}, 0)
            continue
        chunks = differing_slots(leaf.chunks, other, summaries.WIDTH)
        raw = _raw_bytes(leaf.obj)
        found[key] = (leaf.summary, {n: _piece_digests(raw, n) for n in chunks[:REFINED]}, len(chunks))
    return found


def differing_pieces(token: str, wanted: dict, budget: int) -> tuple:
    """On a minority rank, for {own leaf index: {chunk: the majority's piece digests}}: the bytes
    of its own pieces that differ, ({index: [(byte offset, bytes)]}, complete), at most
    ``budget`` bytes (``complete`` is False when the budget stopped it)."""
    leaves, found = _leaves(token), {}
    for index, chunks in wanted.items():
        raw, found[index] = _raw_bytes(leaves[index].obj), []
        for number, theirs in sorted(chunks.items()):
            start = number * summaries.CHUNK
            data = _host_bytes(raw[start:start + summaries.CHUNK])
            for piece in differing_slots(theirs, _piece_digests_of(data), summaries.WIDTH):
                if budget < PIECE:
                    return found, False
                found[index].append((start + piece * PIECE, data[piece * PIECE:(piece + 1) * PIECE]))
                budget -= PIECE
    return found, True


def _raw_bytes(obj):
    if summaries.is_tensor(obj):
        import torch

        return summaries.tensor_flat(obj).view(torch.uint8)
    import numpy

    return summaries.array_flat(obj).view(numpy.uint8)


def _host_bytes(piece) -> bytes:
    return piece.cpu().numpy().tobytes() if hasattr(piece, "cpu") else piece.tobytes()


def _piece_digests(raw, chunk: int) -> bytes:
    return _piece_digests_of(_host_bytes(raw[chunk * summaries.CHUNK:(chunk + 1) * summaries.CHUNK]))


def _piece_digests_of(data: bytes) -> bytes:
    view = memoryview(data)
    return b"".join(hashlib.sha256(view[at:at + PIECE]).digest()[:summaries.WIDTH]
                    for at in range(0, len(view), PIECE))


def max_differences(token: str, relayed: dict) -> dict:
    """On the majority rank: {key: (max |own - theirs|, flat index, note)} over the pieces
    minority ranks sent ({key: (leaf index, [(byte offset, bytes)])})."""
    leaves, answers = _leaves(token), {}
    for key, (index, pieces) in relayed.items():
        try:
            answers[key] = _max_difference(leaves[index].obj, pieces)
        except (TypeError, ValueError, RuntimeError) as exc:   # a dtype without arithmetic
            answers[key] = (None, None, error_line(exc))
    return answers


def _max_difference(obj, pieces: list) -> tuple:
    """(largest |a - b| over the pieces, its flat index, note); nan against a number is noted,
    and is the answer (nan, at its first place) when nothing else differs."""
    numpy, triples = _as_numbers(obj, pieces)
    if triples and triples[0][1].dtype.kind in "iu":
        return _max_int_difference(numpy, triples)
    best, where, first_nan = 0.0, None, None
    for start, own, theirs in triples:
        same = (own == theirs) | (numpy.isnan(own) & numpy.isnan(theirs))
        with numpy.errstate(invalid="ignore", over="ignore"):
            diff = numpy.abs(own - theirs)
        diff[same] = 0
        nans = numpy.flatnonzero(numpy.isnan(diff))
        if first_nan is None and nans.size:
            first_nan = start + int(nans[0])
        diff = numpy.nan_to_num(diff, nan=0.0, posinf=numpy.inf)
        if diff.size and diff.max() > best:
            best, where = float(diff.max()), start + int(diff.argmax())
    if where is None and first_nan is not None:
        return float("nan"), first_nan, "nan where the other has a number"
    note = "and nan where the other has a number" if first_nan is not None else ""
    return (best if where is not None else None), where, note


def _max_int_difference(numpy, triples: list) -> tuple:
    """Integers exactly (float64 would round above 2**53): |a - b| as uint64, where the wrapped
    subtraction of the larger minus the smaller is the true difference (always below 2**64)."""
    best, where = 0, None
    for start, own, theirs in triples:
        a, b = own.view(numpy.uint64), theirs.view(numpy.uint64)
        diff = numpy.where(own >= theirs, a - b, b - a)
        if diff.size and int(diff.max()) > best:
            best, where = int(diff.max()), start + int(diff.argmax())
    return (best if where is not None else None), where, ""


def _wide(numpy_or_torch, kind: str):
    """What a leaf is widened to: complex128, float64, or (integers, booleans) 64-bit integers."""
    name = {"c": "complex128", "f": "float64", "u": "uint64"}.get(kind, "int64")
    return getattr(numpy_or_torch, name)


def _as_numbers(obj, pieces: list) -> tuple:
    """(numpy, [(first element, own values, their values)]), widened to complex128, float64 or
    64-bit integers."""
    import numpy

    if summaries.is_tensor(obj):
        import torch

        flat = summaries.tensor_flat(obj)
        kind = "c" if flat.is_complex() else "f" if flat.is_floating_point() else "i"
        wide = _wide(torch, kind)
        size, dtype = flat.element_size(), flat.dtype

        def own(start, count):
            return flat[start:start + count].cpu().to(wide).numpy()

        def theirs(data):
            return torch.frombuffer(bytearray(data), dtype=dtype).to(wide).numpy()
    else:
        flat = summaries.array_flat(obj)
        wide = _wide(numpy, flat.dtype.kind)
        size, dtype = flat.dtype.itemsize, flat.dtype

        def own(start, count):
            return flat[start:start + count].astype(wide)

        def theirs(data):
            return numpy.frombuffer(data, dtype=dtype).astype(wide)
    triples = []
    for offset, data in pieces:
        other = theirs(data)
        triples.append((offset // size, own(offset // size, len(other)), other))
    return numpy, triples
