"""Group per-rank or per-host results with identical output, like ClusterShell's MsgTree.

Pure: no I/O. Identical outputs are found by hashing the tuple of their strings once per
result (Python caches a string's hash, and a dict compares equal-hash strings only then),
so grouping 512 ranks x 2,000 lines costs one pass and copies no output text.
"""
from __future__ import annotations

import difflib
import re
from functools import cached_property
from typing import Union
from collections.abc import Sequence

from mlp_magic.errors import MlpMagicError
from mlp_magic.core.records import Record
from mlp_magic.core.ranges import fold_hosts, fold_ranks
from mlp_magic.core.results import FAILED, OK, HostResult, RankResult

Result = Union[RankResult, HostResult]
DIFF_CONTEXT = 3
_HUNK_HEADER = re.compile(r"@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@$")


class MemberSet:
    """The header side of a group (its members, label, status), shared by exact and folded groups.

    Needs ``kind``, ``members``, ``keys``, ``status`` and ``exit_code`` on the instance.
    """

    @property
    def count(self) -> int:
        return len(self.members)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @cached_property
    def hosts(self) -> str:
        """Folded host names of the members: "worker[0-1]"."""
        if self.kind == "hosts":
            return _fold_hosts_for_display(self.keys)
        return _fold_hosts_for_display(m.host for m in self.members if m.host)

    @cached_property
    def label(self) -> str:
        """ "ranks 0-13,15 (15) on worker[0-1]", "rank 3 on worker1", or "worker[0-6] (7)"."""
        if self.kind == "hosts":
            return f"{self.hosts} ({self.count})"
        return ranks_label(self.keys, self.hosts)

    @property
    def status_tag(self) -> str:
        """Short status for headers: "" when ok, else "error", "exit 3", "timeout", "unreachable"..."""
        if self.ok:
            return ""
        if self.status == FAILED and self.exit_code is not None:
            return f"exit {self.exit_code}"
        return self.status

    @property
    def truncated(self) -> bool:
        """True when any member's display was capped upstream (the log holds everything)."""
        return any(getattr(m, "truncated", False) for m in self.members)


class OutputGroup(MemberSet, Record, frozen=True, eq=False):
    """Results whose output is identical, shown once under a folded label.

    Compared and hashed by identity: its fields can hold megabytes of text.
    """

    kind: str                     # "ranks" or "hosts"
    members: tuple                # the RankResult / HostResult objects, in key order
    keys: tuple                   # their ranks (int) or host names (str)
    stdout: str
    stderr: str
    status: str
    error: str = ""               # traceback text (ranks only)
    exit_code: int | None = None  # remote exit status (hosts only)

    @property
    def text_pieces(self) -> list[str]:
        """stdout, stderr and the traceback, each starting on its own line (no big copies)."""
        return _on_own_lines([self.stdout, self.stderr, self.error])

    @property
    def text(self) -> str:
        """Everything shown for the group: stdout, stderr, then the traceback."""
        return "".join(self.text_pieces)

    def output_lines(self) -> list[str]:
        """stdout then stderr as lines: what diffs compare."""
        return self.stdout.splitlines() + self.stderr.splitlines()


def ranks_label(ranks: Sequence[int], hosts: str = "") -> str:
    """ "ranks 0-13,15 (15) on worker[0-1]", "rank 3 on worker1" (``hosts``: folded already)."""
    on_hosts = f" on {hosts}" if hosts else ""
    if len(ranks) == 1:
        return f"rank {ranks[0]}{on_hosts}"
    return f"ranks {fold_ranks(ranks)} ({len(ranks)}){on_hosts}"


def fold_hosts_shown(names) -> str:
    """Host names folded for a label (``worker[0-1]``), listed as they are where they cannot be."""
    return _fold_hosts_for_display(names)


def group_results(results: Sequence[Result]) -> list[OutputGroup]:
    """Identical (stdout, stderr, status, error|exit_code) together.

    Rank groups are ordered by their lowest rank; host groups by the order the hosts came in.
    """
    results = list(results)
    if not results:
        return []
    kind = _kind_of(results)
    if kind == "ranks":
        results.sort(key=lambda r: r.rank)
    buckets: dict[tuple, list] = {}
    for result in results:
        buckets.setdefault(_content_key(result, kind), []).append(result)
    return [_make_group(kind, key, members) for key, members in buckets.items()]


def majority(groups: Sequence[OutputGroup]) -> OutputGroup | None:
    """The largest group; on a tie the one with the lowest key (the earliest in order)."""
    best = None
    for group in groups:
        if best is None or group.count > best.count:
            best = group
    return best


def diff_against_majority(group: OutputGroup, majority: OutputGroup) -> str:
    """Unified diff of stdout+stderr from the majority group to ``group``; "" when equal."""
    old, new = majority.output_lines(), group.output_lines()
    # difflib is quadratic-ish; outputs differ in a few lines, so diff only the middle that
    # differs (plus context) and shift the hunk line numbers back.
    head, tail = common_ends(old, new)
    start = max(head - DIFF_CONTEXT, 0)
    keep_tail = max(tail - DIFF_CONTEXT, 0)
    lines = difflib.unified_diff(
        old[start:len(old) - keep_tail], new[start:len(new) - keep_tail],
        fromfile=majority.label, tofile=group.label, lineterm="", n=DIFF_CONTEXT,
    )
    return "\n".join(_shift_hunk_header(line, start) for line in lines)


def common_ends(a: list, b: list) -> tuple[int, int]:
    """(head, tail): how many leading and trailing items a and b share, the tail not reaching
    into the head (list slices compare in C; bisection)."""
    head = _common_prefix(a, b)
    return head, _common_prefix(a[head:][::-1], b[head:][::-1])


def _common_prefix(a: list, b: list) -> int:
    size = min(len(a), len(b))
    if a[:size] == b[:size]:
        return size
    low, high = 0, size          # a[:low] == b[:low]; a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low


def _shift_hunk_header(line: str, offset: int) -> str:
    """ "@@ -3,7 +3,8 @@" -> the same with both start lines moved by ``offset``."""
    match = _HUNK_HEADER.match(line) if offset and line.startswith("@@ ") else None
    if not match:
        return line
    old_start, old_len, new_start, new_len = match.groups()
    return f"@@ -{int(old_start) + offset}{old_len or ''} +{int(new_start) + offset}{new_len or ''} @@"


def _kind_of(results: list) -> str:
    if all(isinstance(r, RankResult) for r in results):
        return "ranks"
    if all(isinstance(r, HostResult) for r in results):
        return "hosts"
    kinds = sorted({type(r).__name__ for r in results})
    raise MlpMagicError(
        f"cannot group a mix of {', '.join(kinds)}: expected all RankResult or all HostResult")


def _content_key(result: Result, kind: str) -> tuple:
    last = result.error if kind == "ranks" else result.exit_code
    return (result.stdout, result.stderr, result.status, last)


def _make_group(kind: str, key: tuple, members: list) -> OutputGroup:
    stdout, stderr, status, last = key
    return OutputGroup(
        kind=kind,
        members=tuple(members),
        keys=tuple(m.key for m in members),
        stdout=stdout,
        stderr=stderr,
        status=status,
        error=last if kind == "ranks" else "",
        exit_code=last if kind == "hosts" else None,
    )


def _fold_hosts_for_display(names) -> str:
    names = list(dict.fromkeys(names))
    try:
        return fold_hosts(names)
    except MlpMagicError:  # a name that cannot be folded (e.g. contains a comma): list them as they are
        return ",".join(str(n) for n in names)


def _on_own_lines(blocks: list[str]) -> list[str]:
    """Non-empty blocks, with a line break added where one does not end a block before the next."""
    present = [b for b in blocks if b]
    pieces: list[str] = []
    for index, block in enumerate(present):
        pieces.append(block)
        if index < len(present) - 1 and not block.endswith("\n"):
            pieces.append("\n")
    return pieces
