"""A rank's half of the hang report's collectives (pure): what it reports of PyTorch's flight
recorder when asked (``slim``), and how the kernel reads its answer back (``parse_answer``).
stacks/pure/collectives sets the ranks' answers side by side.

Nothing of mlp_magic is imported here: a rank loads it (with stacks/rank/recorder) when the
kernel first asks for its collectives, and an engine holds only what it needs.
"""
from __future__ import annotations

import json
from collections.abc import Mapping

KEEP = 8   # entries kept per group and rank: enough to name a recent mismatch, small at 512 ranks


def slim(raw: Mapping, live: Mapping | None = None) -> dict:
    """What a rank reports of its recorder's dump (``_dump_fr_trace_json``'s document): per
    process group its name, description, last enqueued and completed numbers and its last
    ``KEEP`` collectives (point-to-point entries left out: they have numbers of their own).

    The dump keys groups by a number of their own (``pg_id``) and keeps every group it saw,
    destroyed ones too, under their names (``process_group``: a default group made again is
    named "0" again). ``live`` ({name: {"desc", "seq"}}: the rank's groups now, ``seq`` their
    collectives so far or None) picks, per live name, the newest group of that name; without
    it, every group of the dump is reported."""
    # what is not as torch writes it (a list for a number, Infinity) is skipped, as p2p entries are
    status = _mapping(raw.get("pg_status"))
    by_id: dict = {}
    listed = raw.get("entries")
    for entry in listed if isinstance(listed, list) else ():
        if not isinstance(entry, dict) or entry.get("is_p2p") \
                or not _is_count(entry.get("collective_seq_id")):
            continue
        by_id.setdefault(str(entry.get("pg_id")), []).append(entry)
    newest: dict = {}   # name -> the newest pg_id that carries it
    for pg_id, entries in by_id.items():
        name = _group_name(entries[0])
        if name not in newest or group_order(pg_id) > group_order(newest[name]):
            newest[name] = pg_id
    if live is None:
        live = {_group_name(by_id[i][0]) if i in by_id else i: {} for i in set(status) | set(by_id)}
        newest.update({i: i for i in status if i not in by_id})
    return {"groups": [_group(name, live[name], newest.get(name), status, by_id)
                       for name in sorted(live, key=group_order)]}


def entered(raw: Mapping, since_ns: int) -> list:
    """The collectives of a dump entered (enqueued) at or after ``since_ns``, each ``{"group",
    "seq", "op", "t"}`` (``t``: seconds since the epoch): when the rank arrived at each, which
    is how %%mpirun --profile names the straggler."""
    listed = raw.get("entries")
    found = []
    for entry in listed if isinstance(listed, list) else ():
        if not isinstance(entry, dict) or entry.get("is_p2p") \
                or not _is_count(entry.get("collective_seq_id")):
            continue
        created = entry.get("time_created_ns")
        if _is_count(created) and created >= since_ns:
            found.append({"group": _group_name(entry), "seq": entry["collective_seq_id"],
                          "op": op_name(entry.get("profiling_name")), "t": created / 1e9})
    return found


def _group(name: str, now: Mapping, pg_id, status: Mapping, by_id: Mapping) -> dict:
    """One live group: the newest recorded group of its name, unless it made no collective yet."""
    entries = sorted(by_id.get(pg_id, ()), key=lambda e: e["collective_seq_id"])[-KEEP:]
    numbers = _mapping(status.get(pg_id))
    if now.get("seq") == 0:   # a group made again that called nothing yet: not its namesake's past
        entries, numbers = [], {}
    descs = [pg[1] for pg in (e.get("process_group") for e in entries)
             if isinstance(pg, list) and len(pg) > 1 and isinstance(pg[1], str)]
    return {"name": name, "desc": now.get("desc") or (descs[-1] if descs else ""),
            "enqueued": _number(numbers.get("last_enqueued_collective"), entries),
            "completed": _number(numbers.get("last_completed_collective"), ()),
            "last": [{"seq": e["collective_seq_id"], "op": op_name(e.get("profiling_name")),
                      "sizes": _kept(e.get("input_sizes"), _is_sizes),
                      "dtypes": _kept(e.get("input_dtypes"), _is_texts)} for e in entries]}


def _mapping(value) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def _kept(value, fits) -> list:
    return value if fits(value) else []


def _group_name(entry: Mapping) -> str:
    """The name of an entry's group (``process_group``: [name, description])."""
    group = entry.get("process_group")
    return str(group[0]) if isinstance(group, list) and group else "?"


def group_order(name: str) -> tuple:
    """Groups by number ("0", "1", "10"), then by name."""
    return (0, int(name), "") if name.isascii() and name.isdigit() else (1, 0, name)


def _number(value, entries) -> int:
    """A status number (the dump writes them as strings; -1 for none) or, without one, the
    newest entry's."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError, OverflowError):   # OverflowError: Infinity
        return max((e["collective_seq_id"] for e in entries), default=0)


def op_name(profiling_name) -> str:
    """``gloo:all_reduce`` / ``nccl:all_reduce`` -> ``all_reduce``."""
    return str(profiling_name or "?").rpartition(":")[2] or "?"


def parse_answer(text: str) -> list | str | None:
    """A rank's answer file -> its groups ([] for a rank with no process group or no recorder),
    the error its dump met (a string), or None for no answer or one that does not read."""
    try:
        answer = json.loads(text)
    except (ValueError, RecursionError):   # RecursionError: nested too deeply
        return None
    if isinstance(answer, dict) and answer.get("error") and not answer.get("groups"):
        return str(answer["error"])
    return checked_groups(answer.get("groups") if isinstance(answer, dict) else None)


def checked_groups(groups) -> list | None:
    """``groups`` when it is a list of groups as ``slim`` writes them, else None: a value JSON
    reads and slim never writes (Infinity, a list for a number) is no answer, not a traceback
    where the ranks' answers are set side by side (stacks/pure/collectives)."""
    if isinstance(groups, list) and all(_is_group(g) for g in groups):
        return groups
    return None


def _is_group(group) -> bool:
    last = group.get("last", []) if isinstance(group, dict) else None
    return (isinstance(last, list) and isinstance(group.get("name"), str)
            and isinstance(group.get("desc", ""), str)
            and _is_count(group.get("enqueued", 0)) and _is_count(group.get("completed", 0))
            and all(isinstance(e, dict) and _is_count(e.get("seq")) and isinstance(e.get("op", ""), str)
                    and _is_sizes(e.get("sizes", [])) and _is_texts(e.get("dtypes", [])) for e in last))


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_sizes(value) -> bool:
    """A collective's tensor sizes: [[4], [2, 3]]."""
    return isinstance(value, list) and all(
        isinstance(size, list) and all(isinstance(n, int) and not isinstance(n, bool) for n in size)
        for size in value)


def _is_texts(value) -> bool:
    return isinstance(value, list) and all(isinstance(text, str) for text in value)
