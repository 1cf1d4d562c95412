"""``%mpirun --compare``: group ranks by the summaries of their values, and say how groups differ.

Pure: the summaries are made on the ranks (``values/rank/summaries.py``) and arrive as plain dicts.
A summary of a whole value:

    {"type": "OrderedDict", "digest": hex, "structure": hex, "leaves": 120,
     "counts": {"tensor": 120}, "dtypes": [...], "devices": [...], "finite": bool | None,
     "numel": int, "nbytes": int, "leaf": <the leaf summary when the value is one leaf>,
     "nested": containers inside the value}

or ``{"error": "NameError: name 'w' is not defined"}``. A leaf (a tensor, an array, a number, any
other object) is ``{"path", "kind", "type", "shape", "dtype", "device", "finite", "digest",
"value" (numbers), "repr" (numbers and objects)}``. ``digest`` is exact: equal bytes, equal digest.
``structure`` hashes paths, kinds, types, shapes and dtypes only: two values with the same
structure have their leaves in the same order, so they can be compared leaf by leaf by index.
"""
from __future__ import annotations

from mlp_magic.core.ranges import rank_words
from mlp_magic.core.records import Record, fresh

KEYS_SHOWN = 8          # differing keys listed per minority group
DIGEST_SHOWN = 8        # hex digits of a checksum shown


class ErrorGroup(Record):
    """Ranks where the expression raised the same error."""

    ranks: list
    message: str


class LeafDiff(Record):
    """One leaf that differs between a minority group and the majority."""

    path: str                   # "" when the value itself is the leaf
    ref: dict | None            # the majority's leaf (None: the key exists only in this group)
    own: dict | None            # this group's leaf (None: missing in this group)
    max_diff: float | None = None
    at: tuple | None = None     # where the largest difference is, for tensors and arrays
    note: str = ""              # what else is known ("lower bound: 8 of 100 MiB relayed", "nan")


class ValueGroup(Record):
    """Ranks whose values are equal (same digest)."""

    ranks: list
    summary: dict
    diffs: list = fresh(list)   # LeafDiff against the majority (minority groups only)
    differing: int = 0          # leaves that differ (``diffs`` may list fewer)
    relayed: int = 0            # bytes moved between ranks to compute max_diff
    note: str = ""


class Comparison(Record):
    """What ``%mpirun --compare EXPR -o NAME`` stores: the groups, majority first, and errors."""

    expr: str
    groups: list
    errors: list
    summary_bytes: int = 0      # bytes of summaries that reached the notebook
    relayed: int = 0            # bytes moved between ranks (via the kernel) for max differences

    @property
    def equal(self) -> bool:
        """True when every rank evaluated the expression and all values are equal."""
        return len(self.groups) == 1 and not self.errors

    @property
    def ranks(self) -> list:
        return sorted(r for group in (*self.groups, *self.errors) for r in group.ranks)

    @property
    def differing_ranks(self) -> list:
        """Ranks outside the majority group (errors included)."""
        major = set(self.groups[0].ranks) if self.groups else set()
        return [r for r in self.ranks if r not in major]

    @property
    def text(self) -> str:
        return render(self)

    def __repr__(self) -> str:
        return self.text


# ------------------------------------------------------------------------------ grouping
def group_summaries(summaries: dict) -> tuple:
    """{rank: summary} -> ([ValueGroup], [ErrorGroup]): equal digests form a group, the largest
    first (ties: the group with the lowest rank); equal error messages form an error group."""
    by_digest: dict = {}
    by_error: dict = {}
    for rank in sorted(summaries):
        summary = summaries[rank]
        if "error" in summary:
            by_error.setdefault(summary["error"], []).append(rank)
        else:
            by_digest.setdefault(summary["digest"], []).append(rank)
    groups = [ValueGroup(ranks, summaries[ranks[0]]) for ranks in by_digest.values()]
    groups.sort(key=lambda g: (-len(g.ranks), g.ranks[0]))
    errors = [ErrorGroup(ranks, message) for message, ranks in by_error.items()]
    errors.sort(key=lambda e: e.ranks[0])
    return groups, errors


def differing_slots(reference: bytes, own: bytes, width: int) -> list:
    """Indices of the ``width``-byte digests that differ between two equally long digest strings."""
    if len(reference) != len(own):
        raise ValueError("digest strings of different lengths cannot be compared slot by slot")
    return [i for i in range(0, len(own) // width)
            if reference[i * width:(i + 1) * width] != own[i * width:(i + 1) * width]]


def align_paths(reference: list, own: list) -> tuple:
    """Two leaf path lists -> ([(ref index, own index)] of the paths in both, in own's order,
    [paths only in reference], [paths only in own])."""
    ref_index = {path: i for i, path in enumerate(reference)}
    own_set = set(own)
    pairs = [(ref_index[path], i) for i, path in enumerate(own) if path in ref_index]
    missing = [path for path in reference if path not in own_set]
    extra = [path for path in own if path not in ref_index]
    return pairs, missing, extra


def number_difference(ref: dict, own: dict) -> float | int | None:
    """|a - b| of two number leaves, else None."""
    if ref.get("kind") != "number" or own.get("kind") != "number":
        return None
    try:
        diff = abs(own["value"] - ref["value"])
        return diff if isinstance(diff, int) else float(diff)   # ints exactly, however large
    except (TypeError, ValueError, OverflowError):
        return None


def unravel(flat: int, shape) -> tuple:
    """A C-order flat index -> its multi-index in ``shape``."""
    index = []
    for size in reversed(list(shape)):
        index.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(index))


# ------------------------------------------------------------------------------ text
def size_text(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def number_text(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def shape_text(shape) -> str:
    return "[" + ", ".join(str(n) for n in shape) + "]"


def leaf_text(leaf: dict) -> str:
    """A leaf in a few words: 'torch.Tensor [1000, 1000] float32 cpu', 'float 0.5', "str 'a'"."""
    if leaf["kind"] in ("tensor", "array"):
        device = f" {leaf['device'].split(':')[0]}" if leaf.get("device") else ""
        return f"{leaf['type']} {shape_text(leaf['shape'])} {leaf['dtype']}{device}"
    return f"{leaf['type']} {leaf.get('repr', '')}".rstrip()


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def describe(summary: dict) -> str:
    """The one-line description of a whole value (the majority line)."""
    leaf = summary.get("leaf")
    if leaf is not None:
        parts = [leaf_text(leaf)]
    else:
        ordered = sorted(summary["counts"].items(), key=lambda item: -item[1])
        counts = ", ".join(_plural(n, kind) for kind, n in ordered)
        parts = [f"{summary['type']} of {counts}" if counts else f"empty {summary['type']}"]
        parts += [", ".join(summary["dtypes"])] if summary["dtypes"] else []
        parts += [", ".join(summary["devices"])] if summary["devices"] else []
    if summary.get("nbytes"):
        parts.append(size_text(summary["nbytes"]))
    if summary.get("finite") is not None:
        parts.append("finite" if summary["finite"] else "NOT finite (nan or inf)")
    if leaf is None or leaf["kind"] in ("tensor", "array"):
        parts.append(f"checksum {summary['digest'][:DIGEST_SHOWN]}")
    return ", ".join(parts)


def _entries_word(summary: dict) -> str:
    """A flat dict's leaves are its keys (a state_dict); nested values have entries."""
    return "keys" if "dict" in summary["type"].lower() and not summary.get("nested") else "entries"


def diff_text(diff: LeafDiff) -> str:
    """What differs in one leaf, as the minority sees it against the majority."""
    ref, own = diff.ref, diff.own
    if own is None:
        return "missing here"
    if ref is None:
        return "only here"
    if own["kind"] != ref["kind"] or own["type"] != ref["type"]:
        text = f"{leaf_text(own)} vs {leaf_text(ref)}"
    elif own["kind"] in ("tensor", "array") and list(own["shape"]) != list(ref["shape"]):
        text = f"shape {shape_text(own['shape'])} vs {shape_text(ref['shape'])}"
    elif own["kind"] in ("tensor", "array") and own["dtype"] != ref["dtype"]:
        text = f"dtype {own['dtype']} vs {ref['dtype']}"
    elif own["kind"] in ("number", "object"):
        text = f"{own.get('repr', '')} vs {ref.get('repr', '')}"
    else:
        text = "values differ"
    if diff.max_diff is not None:
        where = f" at {shape_text(diff.at)}" if diff.at else ""
        text = f"max |diff| {number_text(diff.max_diff)}{where}" if text == "values differ" \
            else f"{text}, |diff| {number_text(diff.max_diff)}"
    if own.get("finite") is False and ref.get("finite") is not False:
        text += ", NOT finite here"
    return text + (f" ({diff.note})" if diff.note else "")


def _minority_lines(group: ValueGroup, major: ValueGroup, total: int) -> list:
    summary = group.summary
    relayed = f"; {size_text(group.relayed)} relayed" if group.relayed else ""
    checksum = f"checksum {summary['digest'][:DIGEST_SHOWN]}"
    verb = "differs" if len(group.ranks) == 1 else "differ"
    head = f"{rank_words(group.ranks)} ({len(group.ranks)} of {total}) {verb}"
    if summary.get("leaf") is not None and major.summary.get("leaf") is not None:
        detail = diff_text(group.diffs[0]) if group.diffs else describe(summary)
        if summary["leaf"]["kind"] in ("number", "object"):
            return [f"{head}: {detail}"]
        return [f"{head}: {detail} ({checksum}{relayed})"]
    if summary["structure"] != major.summary["structure"]:
        head += f": {describe(summary)}"
    else:
        head += f" in {group.differing} of {summary['leaves']} {_entries_word(summary)} ({checksum}{relayed})"
    lines = [head + (f"; {group.note}" if group.note else "")]
    lines += [f"  {d.path}: {diff_text(d)}" for d in group.diffs[:KEYS_SHOWN]]
    if group.differing > min(len(group.diffs), KEYS_SHOWN):
        lines.append(f"  ... and {group.differing - min(len(group.diffs), KEYS_SHOWN)} more")
    return lines


def render(comparison: Comparison) -> str:
    """Majority first, one line when every rank is equal; then each minority group and each error."""
    total = len(comparison.ranks)
    lines = []
    if comparison.groups:
        major = comparison.groups[0]
        if comparison.equal and total > 1:
            label = f"all {total} ranks equal"
        elif len(major.ranks) == 1:
            label = rank_words(major.ranks)
        else:
            label = f"{rank_words(major.ranks)} ({len(major.ranks)} of {total}) equal"
        lines.append(f"{label}: {describe(major.summary)}")
        for group in comparison.groups[1:]:
            lines += _minority_lines(group, major, total)
    for error in comparison.errors:
        lines.append(f"{rank_words(error.ranks)} ({len(error.ranks)} of {total}): {error.message}")
    return "\n".join(lines)
