"""``%mpirun --compare EXPR``: which ranks hold equal values, and how the others differ.

The path (engine side: ``engine/values.py``; grouping and text: ``core/compare.py``):
1. EXPR is compiled here first: a syntax error is one line and nothing runs.
2. Every rank evaluates EXPR and summarises the value (type, shape, dtype, device, finite,
   a checksum of its bytes): a few hundred bytes per rank reach the notebook, whatever the size.
3. Equal checksums form groups. When there is more than one group, one rank of the majority
   sends its leaves' digests (8 bytes a leaf), and one rank of each minority group answers with
   the leaves that differ, and the 8-byte digests of their 1 MiB chunks.
4. For the differing leaves shown, the majority's rank sends only the chunks whose digests differ,
   the kernel relays them to the minority's rank, and that rank computes max |a - b| itself. So a
   state_dict differing in one element moves one chunk (at most 1 MiB), not the state_dict.
   The relay is bounded (``GROUP_RELAY``, ``TOTAL_RELAY``); past it the difference is a lower bound.
"""
from __future__ import annotations

import pickle
import secrets

from ..core.compare import (
    Comparison, LeafDiff, differing_slots, group_summaries, number_difference, size_text, unravel,
)
from ..engine import values as on_rank
from ..engine.summaries import CHUNK, WIDTH
from ..errors import MlpMagicError
from .rank_calls import Failed, call, call_each

DETAIL_TIMEOUT = 120.0       # each follow-up round (digests, chunk relay) on one rank per group
GROUP_RELAY = 16 << 20       # bytes of chunks relayed to one minority group
TOTAL_RELAY = 64 << 20       # ... and to all of them


def check_expression(expr: str) -> None:
    """One line for an expression that cannot be compiled; nothing is sent to the ranks."""
    if not expr.strip():
        raise MlpMagicError("%mpirun --compare: give an expression, e.g. --compare 'model.state_dict()'")
    try:
        compile(expr, "<--compare>", "eval")
    except SyntaxError as err:
        where = f" (column {err.offset})" if err.offset else ""
        raise MlpMagicError(f"%mpirun --compare: {err.msg} in {expr!r}{where}; nothing was run") from None
    except (ValueError, OverflowError) as err:   # e.g. a null byte
        raise MlpMagicError(f"%mpirun --compare: cannot compile {expr!r}: {err}") from None


def compare(world, expr: str, ranks: list, timeout: float | None = None) -> Comparison:
    check_expression(expr)
    token = secrets.token_hex(8)
    answers = call(world, ranks, on_rank.summarize, expr, token, timeout=timeout, what="%mpirun --compare")
    summaries = {rank: {"error": answer.message} if isinstance(answer, Failed) else answer
                 for rank, answer in answers.items()}
    groups, errors = group_summaries(summaries)
    comparison = Comparison(expr, groups, errors, sum(len(pickle.dumps(a)) for a in summaries.values()))
    holders = sorted(r for group in groups for r in group.ranks)
    try:
        if len(groups) > 1:
            _explain(world, token, comparison)
    finally:
        if holders:   # the ranks keep the value for the follow-ups until told to let it go
            call(world, holders, on_rank.forget, token, timeout=DETAIL_TIMEOUT, what="%mpirun --compare")
    return comparison


def _ask(world, rank: int, function, *args):
    answer = call(world, [rank], function, *args, timeout=DETAIL_TIMEOUT, what="%mpirun --compare")[rank]
    if isinstance(answer, Failed):
        raise MlpMagicError(f"%mpirun --compare: rank {rank} failed while comparing: {answer.message}")
    return answer


def _ask_each(world, arguments: dict, function) -> dict:
    answers = call_each(world, arguments, function, timeout=DETAIL_TIMEOUT, what="%mpirun --compare")
    for rank, answer in answers.items():
        if isinstance(answer, Failed):
            raise MlpMagicError(f"%mpirun --compare: rank {rank} failed while comparing: {answer.message}")
    return answers


def _explain(world, token: str, comparison: Comparison) -> None:
    """Which leaves each minority group has that differ, and by how much."""
    major, minors = comparison.groups[0], comparison.groups[1:]
    reference_rank = major.ranks[0]
    reshaped = [g for g in minors if g.summary["structure"] != major.summary["structure"]]
    reference = _ask(world, reference_rank, on_rank.leaf_digests, token, bool(reshaped))
    by_index = dict(reference, paths=None)
    found = _ask_each(world, {g.ranks[0]: (token, reference if g in reshaped else by_index)
                              for g in minors}, on_rank.differences)
    wanted = sorted({entry[0] for answer in found.values() for entry in answer["listed"]
                     if entry[0] is not None})
    details = _ask(world, reference_rank, on_rank.leaf_details, token, wanted) if wanted else {}
    plans = {}
    for group in minors:
        answer = found[group.ranks[0]]
        group.differing = answer["differing"]
        group.diffs, plans[group.ranks[0]] = _leaf_diffs(answer, details)
        if not group.differing:
            group.note = "same entries; the containers' types or order differ"
    _relay_and_measure(world, token, comparison, reference_rank, plans)


def _leaf_diffs(answer: dict, details: dict) -> tuple:
    """([LeafDiff] of one minority group, {diff position: (ref index, own index, [differing
    chunk numbers], shape)} for the tensors and arrays whose bytes can be compared)."""
    diffs, plan = [], {}
    for ref_index, own_index, own, own_chunks in answer["listed"]:
        ref, ref_chunks = details.get(ref_index, (None, b""))
        diffs.append(LeafDiff(own["path"], ref, own))
        if ref is None:
            continue
        diffs[-1].max_diff = number_difference(ref, own)
        same_layout = own["kind"] in ("tensor", "array") and own["kind"] == ref["kind"] \
            and own["shape"] == ref["shape"] and own["dtype"] == ref["dtype"]
        if same_layout and len(ref_chunks) == len(own_chunks):
            chunks = differing_slots(ref_chunks, own_chunks, WIDTH)
            plan[len(diffs) - 1] = (ref_index, own_index, chunks, own["shape"])
    diffs += [LeafDiff(path, None, None) for path in answer["missing"]]
    return diffs, plan


def _budget(plans: dict) -> dict:
    """{minority rank: {diff position: [chunk numbers to relay]}} within the relay budgets."""
    chosen, total_left = {}, TOTAL_RELAY
    for rank, plan in plans.items():
        group_left = min(GROUP_RELAY, total_left)
        chosen[rank] = {}
        for position, (_, _, chunks, _) in plan.items():
            take = chunks[:max(0, group_left // CHUNK)]
            group_left -= len(take) * CHUNK
            total_left -= len(take) * CHUNK
            chosen[rank][position] = take
    return chosen


def _relay_and_measure(world, token: str, comparison: Comparison, reference_rank: int, plans: dict) -> None:
    """Move the differing chunks from the majority's rank to each minority rank, within the
    budgets, and let that rank compute max |a - b|."""
    chosen = _budget(plans)
    needed: dict = {}
    for rank, plan in plans.items():
        for position, take in chosen[rank].items():
            needed.setdefault(plan[position][0], set()).update(take)
    needed = {index: sorted(numbers) for index, numbers in needed.items() if numbers}
    if not needed:
        return
    sent = _ask(world, reference_rank, on_rank.chunk_bytes, token, needed)
    groups = {g.ranks[0]: g for g in comparison.groups[1:]}
    arguments = {}
    for rank, plan in plans.items():
        relay = {}
        for position, take in chosen[rank].items():
            if take:
                chunks = dict(sent[plan[position][0]])
                relay[plan[position][1]] = [(n, chunks[n]) for n in take]
        if relay:
            arguments[rank] = (token, relay)
            groups[rank].relayed = sum(len(data) for pairs in relay.values() for _, data in pairs)
    for rank, answer in _ask_each(world, arguments, on_rank.max_differences).items():
        _record(groups[rank], plans[rank], chosen[rank], answer)
    comparison.relayed = sum(g.relayed for g in groups.values())


def _record(group, plan: dict, chosen: dict, answer: dict) -> None:
    position_of = {own_index: position for position, (_, own_index, _, _) in plan.items()}
    for own_index, (largest, flat, note) in answer.items():
        position = position_of[own_index]
        diff = group.diffs[position]
        _, _, chunks, shape = plan[position]
        diff.max_diff = largest
        diff.at = unravel(flat, shape) if flat is not None else None
        if len(chosen[position]) < len(chunks):
            bound = (f"at least: compared {size_text(len(chosen[position]) * CHUNK)} of the "
                     f"{size_text(len(chunks) * CHUNK)} that differ")
            note = f"{note}; {bound}" if note else bound
        diff.note = note
