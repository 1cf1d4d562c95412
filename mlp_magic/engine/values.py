"""What ``%mpirun --compare`` runs inside each rank (the kernel calls these through ipyparallel).

The kernel evaluates nothing itself. ``summarize`` evaluates the expression in the rank's
namespace and answers with a summary of a few hundred bytes; the value and its leaves' chunk
digests stay here, under a token, until ``forget``. Only when ranks differ does the kernel ask
more, and then of one rank per group: which leaves differ (``differences``), their chunk digests
(``leaf_details``), the bytes of the chunks that differ on one majority rank (``chunk_bytes``),
and, on the minority rank, the largest difference against those bytes (``max_differences``).
"""
from __future__ import annotations

from ..core.compare import align_paths, differing_slots
from . import summaries
from .bootstrap import engine_shell

LISTED = 8               # differing leaves described in detail per group (core.compare.KEYS_SHOWN)
_kept: dict = {}         # token -> (value, [Leaf]); one comparison at a time
ERROR_CHARS = 300


def error_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 3] + "..."


def summarize(expr: str, token: str) -> dict:
    """Evaluate ``expr`` in the rank's namespace; its summary, or {"error": one line}."""
    _kept.clear()   # a comparison the kernel could not finish must not keep values alive
    try:
        value = eval(compile(expr, "<--compare>", "eval"), engine_shell().user_ns)
    except Exception as exc:
        return {"error": error_line(exc)}
    try:
        summary, leaves = summaries.summarize(value)
    except Exception as exc:
        return {"error": f"could not summarize the value: {error_line(exc)}"}
    _kept[token] = (value, leaves)
    return summary


def forget(token: str) -> None:
    _kept.pop(token, None)


def _leaves(token: str) -> list:
    if token not in _kept:
        raise RuntimeError("the value to compare is gone from this rank (another comparison began)")
    return _kept[token][1]


def leaf_digests(token: str, with_paths: bool) -> dict:
    """The majority's reference: each leaf's digest (8 bytes each), and the paths when the
    minority's structure differs (else leaves align by index)."""
    leaves = _leaves(token)
    digests = b"".join(bytes.fromhex(leaf.summary["digest"]) for leaf in leaves)
    return {"digests": digests, "paths": [leaf.path for leaf in leaves] if with_paths else None}


def differences(token: str, reference: dict) -> dict:
    """On a minority rank: which of its leaves differ from the reference (``leaf_digests``).

    {"differing": count, "listed": [(ref index or None, own index, own summary, own chunk digests)],
     "missing": [paths only in the reference], "missing_count": n}."""
    leaves = _leaves(token)
    mine = b"".join(bytes.fromhex(leaf.summary["digest"]) for leaf in leaves)
    width = summaries.WIDTH
    if reference["paths"] is None:
        pairs = [(i, i) for i in differing_slots(reference["digests"], mine, width)]
        extra, missing = [], []
    else:
        aligned, missing, extra = align_paths(reference["paths"], [leaf.path for leaf in leaves])
        digests = reference["digests"]
        pairs = [(r, o) for r, o in aligned
                 if digests[r * width:(r + 1) * width] != mine[o * width:(o + 1) * width]]
    own_index = {leaf.path: i for i, leaf in enumerate(leaves)}
    differ = pairs + [(None, own_index[path]) for path in extra]
    listed = [(r, o, leaves[o].summary, leaves[o].chunks) for r, o in differ[:LISTED]]
    return {"differing": len(differ) + len(missing), "listed": listed,
            "missing": missing[:max(0, LISTED - len(listed))], "missing_count": len(missing)}


def leaf_details(token: str, indices: list) -> dict:
    """On the majority rank: {index: (summary, chunk digests)} of these leaves."""
    leaves = _leaves(token)
    return {i: (leaves[i].summary, leaves[i].chunks) for i in indices}


def chunk_bytes(token: str, wanted: dict) -> dict:
    """On the majority rank: {leaf index: [(chunk number, bytes)]} for {leaf index: [chunks]}.
    GPU tensors are copied one chunk at a time."""
    leaves = _leaves(token)
    found = {}
    for index, numbers in wanted.items():
        raw = _raw_bytes(leaves[index].obj)
        found[index] = [(n, _chunk(raw, n)) for n in numbers]
    return found


def _raw_bytes(obj):
    if summaries.is_tensor(obj):
        import torch

        return summaries.tensor_flat(obj).view(torch.uint8)
    import numpy

    return summaries.array_flat(obj).view(numpy.uint8)


def _chunk(raw, number: int) -> bytes:
    piece = raw[number * summaries.CHUNK:(number + 1) * summaries.CHUNK]
    return piece.cpu().numpy().tobytes() if hasattr(piece, "cpu") else piece.tobytes()


def max_differences(token: str, relayed: dict) -> dict:
    """On a minority rank: {own leaf index: (max |own - ref|, flat index, any nan differs)} over
    the chunks relayed from the majority ({own index: [(chunk number, bytes)]})."""
    leaves = _leaves(token)
    answers = {}
    for index, chunks in relayed.items():
        try:
            answers[index] = _max_difference(leaves[index].obj, chunks)
        except (TypeError, ValueError, RuntimeError) as exc:   # a dtype without arithmetic
            answers[index] = (None, None, error_line(exc))
    return answers


def _max_difference(obj, chunks: list) -> tuple:
    numpy, triples = _as_numbers(obj, chunks)
    best, where, nan_differs = -1.0, None, False
    for start, own, ref in triples:
        same = (own == ref) | (numpy.isnan(own) & numpy.isnan(ref))
        with numpy.errstate(invalid="ignore", over="ignore"):
            diff = numpy.abs(own - ref)
        diff[same] = 0
        nan_differs = nan_differs or bool(numpy.isnan(diff).any())
        diff = numpy.nan_to_num(diff, nan=0.0, posinf=numpy.inf)
        if diff.size and diff.max() > best:
            best, where = float(diff.max()), start + int(diff.argmax())
    note = "nan where the other has a number" if nan_differs else ""
    return (best if where is not None else None), where, note


def _as_numbers(obj, chunks: list) -> tuple:
    """(numpy, [(start element, own values, ref values)]), widened to float64 or complex128."""
    import numpy

    if summaries.is_tensor(obj):
        import torch

        flat = summaries.tensor_flat(obj)
        wide = torch.complex128 if flat.is_complex() else torch.float64
        size, dtype = flat.element_size(), flat.dtype

        def own(start, count):
            return flat[start:start + count].cpu().to(wide).numpy()

        def ref(data):
            return torch.frombuffer(bytearray(data), dtype=dtype).to(wide).numpy()
    else:
        flat = summaries.array_flat(obj)
        wide = numpy.complex128 if flat.dtype.kind == "c" else numpy.float64
        size, dtype = flat.dtype.itemsize, flat.dtype

        def own(start, count):
            return flat[start:start + count].astype(wide)

        def ref(data):
            return numpy.frombuffer(data, dtype=dtype).astype(wide)
    per_chunk = summaries.CHUNK // size
    starts = [n * per_chunk for n, _ in chunks]
    refs = [ref(data) for _, data in chunks]
    owns = [own(start, len(r)) for start, r in zip(starts, refs)]
    return numpy, list(zip(starts, owns, refs))
