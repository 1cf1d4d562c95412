"""Which collective each rank is in, from PyTorch's flight recorder (pure).

Every rank of a World records its torch.distributed collectives (``stacks/rank/recorder`` turns
the recorder on and dumps it when asked). For each process group the dump says the sequence
number of the last collective the rank enqueued and the last it completed, and keeps the last
entries (op, sizes, dtypes). Set side by side, they say what stacks alone cannot: when every
rank sits on the same Python line, which rank ran one collective fewer, and which called the
same ``#N`` with another op, size or dtype (what torch's own analyzer reports from dump files,
here live and next to the merged stacks).

stacks/pure/recorded is the rank's half (what it writes: a few entries per group, never the whole
buffer); here is the kernel's: ``section``, the lines of the hang report.
"""
from __future__ import annotations

from collections.abc import Mapping

from mlp_magic.core.ranges import rank_words
from mlp_magic.stacks.pure.recorded import group_order

TITLE = "collectives (PyTorch flight recorder; #N: the collective's number in its group)"
_ONE_LINE = 160   # a group's states on one line up to this width, one line each beyond
_MISMATCHES_SHOWN = 3
DTYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
          "Long": "int64", "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8",
          "Bool": "bool", "ComplexFloat": "complex64", "ComplexDouble": "complex128"}
# Ops whose ranks legitimately pass different sizes (the root's buffer, each peer's share): only
# the op itself must match across ranks
UNEVEN_OPS = frozenset({"scatter", "gather", "all_to_all", "alltoall", "alltoall_base", "all_to_all_single",
                        "allgather_coalesced", "gather_object", "scatter_object"})


def comparable(entry: Mapping) -> str:
    """What every rank of a collective must agree on: its op, and for the even ops its sizes
    and dtypes too."""
    return entry.get("op") or "?" if entry.get("op") in UNEVEN_OPS else signature(entry)


def signature(entry: Mapping) -> str:
    """``all_reduce [4] float32``: what the ranks must agree on for one collective."""
    sizes = entry.get("sizes") or []
    shown = " ".join(str(list(s)) for s in sizes[:3]) + (f" (+{len(sizes) - 3})" if len(sizes) > 3 else "")
    dtypes = sorted({DTYPES.get(d, str(d).lower()) for d in entry.get("dtypes") or ()})
    return " ".join(part for part in (entry.get("op") or "?", shown, ",".join(dtypes)) if part)


def rank_state(group: Mapping, newest: int, line: str | None) -> str:
    """One rank's place in one group: in which collective it waits, or the last it completed,
    and how far behind the group's newest it is."""
    enqueued, completed = int(group.get("enqueued", 0)), int(group.get("completed", 0))
    if enqueued > completed:
        entry = next((e for e in group.get("last") or () if e.get("seq") == enqueued), {})
        text = _in_collective(entry, enqueued) + (f" ({line})" if line else "")
        if enqueued - completed > 1:
            text += f", {enqueued - completed} not completed since #{completed}"
    elif enqueued:
        text = f"completed #{completed}, in no collective"
    else:
        text = "no collective yet"
    return text + (f", behind by {newest - enqueued}" if newest > enqueued else "")


def _in_collective(entry: Mapping, number: int) -> str:
    if not entry:
        return f"in collective #{number}"
    op, _, rest = signature(entry).partition(" ")
    return f"in {op} #{number}" + (f" {rest}" if rest else "")


def _group_title(name: str, desc: str) -> str:
    if name == "0" or desc == "default_pg":
        return "default group"
    return f"group '{name}'" + (f" ({desc})" if desc and desc != "undefined" else "")


def group_lines(name: str, by_rank: Mapping, where: Mapping) -> list:
    """The lines of one process group: its ranks grouped by state (the largest group first),
    then the collectives whose number some ranks called with another op, size or dtype.
    ``by_rank``: {rank: that rank's group}; ``where``: {rank: the user's line it waits on}."""
    newest = max(int(g.get("enqueued", 0)) for g in by_rank.values())
    states: dict = {}
    for rank, group in sorted(by_rank.items()):
        states.setdefault(rank_state(group, newest, where.get(rank)), []).append(rank)
    parts = [f"{_ranks(ranks)}: {state}" for state, ranks in
             sorted(states.items(), key=lambda item: (-len(item[1]), item[1][0]))]
    title = _group_title(name, next((g.get("desc", "") for g in by_rank.values() if g.get("desc")), ""))
    joined = f"{title}: " + "; ".join(parts)
    lines = [joined] if len(joined) <= _ONE_LINE else [f"{title}:"] + [f"  {part}" for part in parts]
    return lines + [f"  {line}" for line in mismatches(by_rank)]


def _ranks(ranks: list) -> str:
    return rank_words(ranks) + (f" ({len(ranks)})" if len(ranks) > 1 else "")


def mismatches(by_rank: Mapping) -> list:
    """``mismatch at #7: ranks 0-2 all_reduce [4] float32; rank 3 all_reduce [8] float32``, for
    the newest numbers that some ranks called differently."""
    calls: dict = {}
    for rank, group in by_rank.items():
        for entry in group.get("last") or ():
            calls.setdefault(entry.get("seq"), {}).setdefault(comparable(entry), []).append(rank)
    found = []
    for number in sorted((n for n, seen in calls.items() if len(seen) > 1), reverse=True)[:_MISMATCHES_SHOWN]:
        seen = sorted(calls[number].items(), key=lambda item: (-len(item[1]), min(item[1])))
        found.append(f"mismatch at #{number}: " + "; ".join(f"{_ranks(sorted(r))} {s}" for s, r in seen))
    return found


def section(answers: Mapping, where: Mapping) -> list:
    """The hang report's collectives lines, from every rank's answer ({rank: groups, an error or
    None}): none at all when no rank has a process group with the recorder on and none failed
    (no torch.distributed, a torch without the recorder): such a report has no section."""
    by_group: dict = {}
    for rank, groups in answers.items():
        for group in groups if isinstance(groups, list) else ():
            by_group.setdefault(str(group["name"]), {})[rank] = group
    errors: dict = {}
    for rank, answer in answers.items():
        if isinstance(answer, str):
            errors.setdefault(answer, []).append(rank)
    if not by_group and not errors:
        return []
    lines = [TITLE]
    for name in sorted(by_group, key=group_order):
        lines += group_lines(name, by_group[name], where)
    for error, ranks in sorted(errors.items(), key=lambda item: min(item[1])):
        lines.append(f"{_ranks(sorted(ranks))}: the recorder could not be read ({error})")
    alone = sorted(rank for rank, groups in answers.items() if groups == [])
    if alone and by_group:
        lines.append(f"{_ranks(alone)}: no process group (torch.distributed not initialised there)")
    silent = sorted(rank for rank, groups in answers.items() if groups is None)
    if silent:
        lines.append(f"{_ranks(silent)}: no answer")
    return lines
