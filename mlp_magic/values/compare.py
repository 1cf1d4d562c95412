"""``%mpirun --compare EXPR``: which ranks hold equal values, and how the others differ.

The path (engine side: ``values/rank/compare.py``; grouping and text: ``values/pure/compare.py``):
1. EXPR is compiled here first: a syntax error is one line and nothing runs.
2. Every rank evaluates EXPR and summarises the value (type, shape, dtype, device, finite, a
   checksum of its bytes): one round trip, a few hundred bytes per rank, whatever the size. The
   ranks keep the value until the next cell, for step 3.
3. Only when checksums differ, and then with one rank per group, never all of them:
   a. the majority's rank sends its leaves' digests (8 bytes a leaf);
   b. each minority's rank answers with the leaves that differ and their 64 KiB chunk digests;
   c. the majority's rank digests the 1 KiB pieces of the chunks that differ;
   d. the minority's rank sends the bytes of the pieces that differ (``GROUP_RELAY``,
      ``TOTAL_RELAY`` bound them; beyond, the difference is a lower bound);
   e. the majority's rank computes max |a - b| over them.
   A state_dict differing in one element moves one 1 KiB piece, not the state_dict.
"""
from __future__ import annotations

import pickle
import secrets

from mlp_magic.values.pure.compare import Comparison, LeafDiff, group_summaries, number_difference, unravel
from mlp_magic.values.rank import compare as on_rank
from mlp_magic.errors import MlpMagicError
from mlp_magic.client.job import call, call_each
from mlp_magic.client.remote_errors import Failed

DETAIL_TIMEOUT = 120.0       # each follow-up round (digests, relay) on one rank per group
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


class ByShell:
    """The ranks reached as ever, by requests on their shell channel (client/job). Ranks stopped
    at a breakpoint are reached on their control channel instead (debugging/stopped.ByControl),
    and evaluate in their frames."""

    def __init__(self, world):
        self.world = world

    def call(self, ranks: list, function, *args, timeout=None, what: str = "") -> dict:
        return call(self.world, ranks, function, *args, timeout=timeout, what=what)

    def call_each(self, arguments: dict, function, timeout=None, what: str = "") -> dict:
        return call_each(self.world, arguments, function, timeout=timeout, what=what)


def compare(world, expr: str, ranks: list, timeout: float | None = None, reach=None) -> Comparison:
    """``reach``: how the ranks are asked (ByShell(world) by default)."""
    check_expression(expr)
    reach = reach or ByShell(world)
    token = secrets.token_hex(8)
    answers = reach.call(ranks, on_rank.summarize, expr, token, timeout=timeout, what="%mpirun --compare")
    summaries = {rank: {"error": answer.message} if isinstance(answer, Failed) else answer
                 for rank, answer in answers.items()}
    groups, errors = group_summaries(summaries)
    comparison = Comparison(expr, groups, errors, sum(len(pickle.dumps(a)) for a in summaries.values()))
    if len(groups) > 1:
        _explain(reach, token, comparison)
    return comparison


def _ask(reach, rank: int, function, *args):
    answer = reach.call([rank], function, *args, timeout=DETAIL_TIMEOUT, what="%mpirun --compare")[rank]
    if isinstance(answer, Failed):
        raise MlpMagicError(f"%mpirun --compare: rank {rank} failed while comparing: {answer.message}")
    return answer


def _ask_each(reach, arguments: dict, function) -> dict:
    answers = reach.call_each(arguments, function, timeout=DETAIL_TIMEOUT, what="%mpirun --compare")
    for rank, answer in answers.items():
        if isinstance(answer, Failed):
            raise MlpMagicError(f"%mpirun --compare: rank {rank} failed while comparing: {answer.message}")
    return answers


def _explain(reach, token: str, comparison: Comparison) -> None:
    """Which leaves each minority group has that differ, and by how much (steps 3a-e above)."""
    major, minors = comparison.groups[0], comparison.groups[1:]
    reference_rank = major.ranks[0]
    reshaped = [g for g in minors if g.summary["structure"] != major.summary["structure"]]
    reference = _ask(reach, reference_rank, on_rank.leaf_digests, token, bool(reshaped))
    by_index = dict(reference, paths=None)
    found = _ask_each(reach, {g.ranks[0]: (token, reference if g in reshaped else by_index)
                              for g in minors}, on_rank.differences)
    asked = {(rank, ref): (ref, chunks) for rank, answer in found.items()
             for ref, _, _, chunks in answer["listed"] if ref is not None}
    details = _ask(reach, reference_rank, on_rank.leaf_details, token, asked) if asked else {}
    wanted = {}
    for group in minors:
        rank, answer = group.ranks[0], found[group.ranks[0]]
        group.differing = answer["differing"]
        group.diffs, wanted[rank] = _leaf_diffs(rank, answer, details)
        if not group.differing:
            group.note = "same entries; the containers' types or order differ"
    _relay_and_measure(reach, token, comparison, reference_rank, {r: w for r, w in wanted.items() if w})


def _leaf_diffs(rank: int, answer: dict, details: dict) -> tuple:
    """([LeafDiff] of one minority group, {diff position: (ref index, own index, {chunk: the
    majority's piece digests}, chunks that differ)} for the tensors and arrays to measure)."""
    diffs, wanted = [], {}
    for ref_index, own_index, own, _ in answer["listed"]:
        ref, pieces, differing = details.get((rank, ref_index), (None, {}, 0))
        diffs.append(LeafDiff(own["path"], ref, own))
        if ref is None:
            continue
        diffs[-1].max_diff = number_difference(ref, own)
        same_layout = own["kind"] in ("tensor", "array") and own["kind"] == ref["kind"] \
            and own["shape"] == ref["shape"] and own["dtype"] == ref["dtype"]
        if same_layout and pieces:
            wanted[len(diffs) - 1] = (ref_index, own_index, pieces, differing)
    diffs += [LeafDiff(path, None, None) for path in answer["missing"]]
    return diffs, wanted


def _relay_and_measure(reach, token: str, comparison: Comparison, reference_rank: int, wanted: dict) -> None:
    """The minority ranks send their differing pieces (within the budgets); the majority's rank
    computes max |a - b| over them."""
    if not wanted:
        return
    budget = min(GROUP_RELAY, TOTAL_RELAY // len(wanted))
    sent = _ask_each(reach, {rank: (token, {own: pieces for _, own, pieces, _ in plan.values()}, budget)
                             for rank, plan in wanted.items()}, on_rank.differing_pieces)
    groups = {g.ranks[0]: g for g in comparison.groups[1:]}
    relay = {}
    for rank, (pieces, _) in sent.items():
        for position, (ref, own, _, _) in wanted[rank].items():
            relay[(rank, position)] = (ref, pieces.get(own, []))
        groups[rank].relayed = sum(len(data) for found in pieces.values() for _, data in found)
    measured = _ask(reach, reference_rank, on_rank.max_differences, token, relay)
    for (rank, position), (largest, flat, note) in measured.items():
        diff, (_, _, refined, differing) = groups[rank].diffs[position], wanted[rank][position]
        diff.max_diff = largest
        diff.at = unravel(flat, diff.own["shape"]) if flat is not None else None
        if not sent[rank][1] or len(refined) < differing:
            note = "; ".join(filter(None, [note, "at least: the relay budget stopped before every "
                                                 "differing byte was compared"]))
        diff.note = note
    comparison.relayed = sum(g.relayed for g in groups.values())
