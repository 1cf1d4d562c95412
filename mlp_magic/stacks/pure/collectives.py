"""Which collective each rank is in, from PyTorch's flight recorder (pure).

Every rank of a World records its torch.distributed collectives (``stacks/rank/recorder`` turns
the recorder on and dumps it when asked). For each process group the dump says the sequence
number of the last collective the rank enqueued and the last it completed, and keeps the last
entries (op, sizes, dtypes). Set side by side, they say what stacks alone cannot: when every
rank sits on the same Python line, which rank ran one collective fewer, and which called the
same ``#N`` with another op, size or dtype (what torch's own analyzer reports from dump files,
here live and next to the merged stacks).

``slim`` is the rank's half (what it writes: a few entries per group, never the whole buffer);
``section`` the kernel's (the lines of the hang report).
"""
from __future__ import annotations

import json
import signal
from collections.abc import Mapping

from mlp_magic.core.ranges import rank_words

# The signal that asks a rank for its recorder's state (engine/side_signal: answered by a thread,
# so while the main thread is blocked in the collective). Real-time: SIGUSR1 is the stacks'.
COLLECTIVES_SIGNAL = int(signal.SIGRTMIN) + 7
KEEP = 8   # entries kept per group and rank: enough to name a recent mismatch, small at 512 ranks
TITLE = "collectives (PyTorch flight recorder; #N: the collective's number in its group)"
_ONE_LINE = 160   # a group's states on one line up to this width, one line each beyond
_MISMATCHES_SHOWN = 3
DTYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
          "Long": "int64", "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8",
          "Bool": "bool", "ComplexFloat": "complex64", "ComplexDouble": "complex128"}


# ------------------------------------------------------------------------ the rank's half

def slim(raw: Mapping, live: Mapping | None = None) -> dict:
    """What a rank reports of its recorder's dump (``_dump_fr_trace_json``'s document): per
    process group its name, description, last enqueued and completed numbers and its last
    ``KEEP`` collectives (point-to-point entries left out: they have numbers of their own).

    The dump keys groups by a number of their own (``pg_id``) and keeps every group it saw,
    destroyed ones too, under their names (``process_group``: a default group made again is
    named "0" again). ``live`` ({name: {"desc", "seq"}}: the rank's groups now, ``seq`` their
    collectives so far or None) picks, per live name, the newest group of that name; without
    it, every group of the dump is reported."""
    status = raw.get("pg_status") or {}
    by_id: dict = {}
    for entry in raw.get("entries") or ():
        if entry.get("is_p2p") or not isinstance(entry.get("collective_seq_id"), int):
            continue
        by_id.setdefault(str(entry.get("pg_id")), []).append(entry)
    newest: dict = {}   # name -> the newest pg_id that carries it
    for pg_id, entries in by_id.items():
        name = str((entries[0].get("process_group") or ["?"])[0])
        if name not in newest or _group_order(pg_id) > _group_order(newest[name]):
            newest[name] = pg_id
    if live is None:
        live = {str((by_id[i][0].get("process_group") or ["?"])[0]) if i in by_id else i: {}
                for i in set(status) | set(by_id)}
        newest.update({i: i for i in status if i not in by_id})
    return {"groups": [_group(name, live[name], newest.get(name), status, by_id)
                       for name in sorted(live, key=_group_order)]}


def _group(name: str, now: Mapping, pg_id, status: Mapping, by_id: Mapping) -> dict:
    """One live group: the newest recorded group of its name, unless it made no collective yet."""
    entries = sorted(by_id.get(pg_id, ()), key=lambda e: e["collective_seq_id"])[-KEEP:]
    numbers = status.get(pg_id) or {}
    if now.get("seq") == 0:   # a group made again that called nothing yet: not its namesake's past
        entries, numbers = [], {}
    descs = [e["process_group"][1] for e in entries if len(e.get("process_group") or ()) > 1]
    return {"name": name, "desc": now.get("desc") or (descs[-1] if descs else ""),
            "enqueued": _number(numbers.get("last_enqueued_collective"), entries),
            "completed": _number(numbers.get("last_completed_collective"), ()),
            "last": [{"seq": e["collective_seq_id"], "op": op_name(e.get("profiling_name")),
                      "sizes": e.get("input_sizes") or [], "dtypes": e.get("input_dtypes") or []}
                     for e in entries]}


def _group_order(name: str) -> tuple:
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def _number(value, entries) -> int:
    """A status number (the dump writes them as strings; -1 for none) or, without one, the
    newest entry's."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return max((e["collective_seq_id"] for e in entries), default=0)


def op_name(profiling_name) -> str:
    """``gloo:all_reduce`` / ``nccl:all_reduce`` -> ``all_reduce``."""
    return str(profiling_name or "?").rpartition(":")[2] or "?"


def parse_answer(text: str) -> list | str | None:
    """A rank's answer file -> its groups ([] for a rank with no process group or no recorder),
    the error its dump met (a string), or None for no answer or one that does not read."""
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    if isinstance(answer, dict) and answer.get("error") and not answer.get("groups"):
        return str(answer["error"])
    return checked_groups(answer.get("groups") if isinstance(answer, dict) else None)


def checked_groups(groups) -> list | None:
    """``groups`` when it is a list of groups (each a dict with a name), else None."""
    if isinstance(groups, list) and all(isinstance(g, dict) and "name" in g for g in groups):
        return groups
    return None


# ------------------------------------------------------------------------ the kernel's half

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
    for name in sorted(by_group, key=_group_order):
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
