"""Fold outputs that differ only in their numbers into one group, line by line (pure).

``fold_groups`` takes exact groups (``grouping.group_results``) and returns groups to show:
an exact group stays as it is unless other outputs fold with it; outputs whose lines are the
same once numbers are masked (``fold_numbers``) become one ``FoldedGroup``, whose lines show
each varying number as a summary (``fold_summary``) and name their outliers.

How, in four steps, each costing one pass in C over the text where it can:
  1. shapes: exact outputs with the same shape (digits as 0) share where their numbers are, so
     one regex scan serves all of them (``Shape``); outputs with hex ids are scanned one by one;
  2. templates: shapes whose masked lines are the same fold together (``Template``);
  3. alignment: templates of the same status are aligned the way a diff aligns them (common
     head and tail, then difflib on the middle), so a line only some ranks print (rank 0's
     header) becomes one line with its rank set and the rest still folds; outputs with fewer
     than half of their lines in common stay apart;
  4. summaries (``fold_columns``): each field's tokens are cut from every output at once (in
     C), a bounded number at a time, and summarised; fields equal everywhere, or equal to each
     output's rank, are recognised without cutting anything.

Nothing is copied but the tokens being summarised; ``FoldedGroup.expand(key)`` rebuilds any
member's exact output from the folded lines (the round trip the tests check).
"""
from __future__ import annotations

import difflib

from mlp_magic.output.pure.fold.columns import slot_summaries
from mlp_magic.output.pure.fold.numbers import MASK, fill, label_before
from mlp_magic.output.pure.fold.shapes import Template, shapes_of, templates_of
from mlp_magic.output.pure.grouping import MemberSet, common_ends
from mlp_magic.core.records import Record

ALIGN_LIMIT = 40_000         # middle lengths multiplied: beyond this, difflib (quadratic) is not run
MERGE_TRIES = 3              # folded groups of the same status an output may try to join


class FoldedLine(Record, frozen=True, eq=False):
    template: str                 # the line with MASK for each number
    fields: tuple                 # one fold_summary.FieldSummary per MASK
    keys: tuple | None = None     # the members printing this line, when not all of them do
    sources: tuple = ()           # ((Template, line index), ...): where its versions come from

    @property
    def text(self) -> str:
        """The line with each field's summary: "step 10 loss {0.5..0.6 ~0.55} rank {rank}"."""
        return fill(self.template, [f.text for f in self.fields])

    def pieces(self) -> list:
        """Literal text and fields in order: [str, FieldSummary, str, ...] (renderers style them)."""
        literals = self.template.split(MASK)
        out: list = [literals[0]]
        for field, literal in zip(self.fields, literals[1:]):
            out += [field, literal]
        return out

    def outliers(self) -> list:
        """[(field label, Outlier)] in field order: "loss", Outlier((37,), "nan")."""
        found = []
        for index, field in enumerate(self.fields):
            if field.outliers:
                literals = self.template.split(MASK)[:index + 1]
                label = label_before(" ".join(literals)) or f"value {index + 1}"
                found.extend((label, outlier) for outlier in field.outliers)
        return found


class FoldedGroup(MemberSet, Record, frozen=True, eq=False):
    """Outputs that differ in numbers (and in lines only some print), shown as one."""

    kind: str                     # "ranks" or "hosts"
    members: tuple                # every member of every exact group folded here, in key order
    keys: tuple
    status: str
    lines: tuple                  # FoldedLine
    exact: tuple                  # the exact OutputGroups folded here
    exit_code: int | None = None

    def expand(self, key) -> str:
        """One member's exact output (stdout, stderr, traceback), rebuilt from the folded lines."""
        item, index = _find(self.lines, key)
        text = item.texts[index]
        lines = [_line_of(item, text, j) for line in self.lines
                 for template, j in line.sources if template is item.owner]
        return "\n".join(lines) + ("\n" if item.owner.ends_newline else "")

    def versions(self, line: FoldedLine) -> list:
        """[(keys, exact line)] of one folded line, one entry per distinct output, in key order."""
        found = []
        for template, j in line.sources:
            for item in template.shapes:
                found.extend((group.keys, _line_of(item, text, j))
                             for group, text in zip(item.groups, item.texts))
        return sorted(found, key=lambda entry: _key_order(entry[0][0]))


def fold_groups(groups, *, follows: dict | None = None) -> list:
    """Exact groups -> the groups to show: OutputGroup (nothing folds with it) or FoldedGroup.

    ``follows``: {"local_rank": {rank: value}, "node_rank": {...}} for fields that follow those;
    a field equal to the rank is always recognised (rank groups).
    """
    groups = list(groups)
    if len(groups) < 2:
        return groups
    order = {id(g): i for i, g in enumerate(groups)}
    shapes, kept = shapes_of(groups)
    units = _align(templates_of(shapes, order))
    shown = [_build(unit, follows or {}) for unit in units] + kept
    return sorted(shown, key=lambda g: min(order[id(e)] for e in _exact_of(g)))


# ------------------------------------------------------------------ alignment
class _Unit:
    """A folded group being built: its lines (slots) and the templates aligned into them."""

    def __init__(self, template: Template):
        self.status = (template.status, template.exit_code)
        self.templates = [template]
        self.slots = [[line, [(template, j)]] for j, line in enumerate(template.templates)]

    def merge(self, template: Template) -> bool:
        """Align ``template``'s lines with these; join when more than half of the shorter match."""
        ours = [slot[0] for slot in self.slots]
        pairs = _matching_pairs(ours, list(template.templates))
        if 2 * len(pairs) <= min(len(ours), len(template.templates)):
            return False
        slots, done_a, done_b = [], 0, 0
        for a, b in [*pairs, (len(ours), len(template.templates))]:
            slots.extend(self.slots[done_a:a])
            slots.extend([line, [(template, j)]] for j, line in
                         enumerate(template.templates[done_b:b], start=done_b))
            if a < len(ours):
                self.slots[a][1].append((template, b))
                slots.append(self.slots[a])
            done_a, done_b = a + 1, b + 1
        self.slots = slots
        self.templates.append(template)
        return True


def _align(templates: list) -> list:
    units: list = []
    for template in sorted(templates, key=lambda t: (-t.size, t.first)):
        status = (template.status, template.exit_code)
        candidates = [u for u in units if u.status == status][:MERGE_TRIES]
        if not any(unit.merge(template) for unit in candidates):
            units.append(_Unit(template))
    return units


def _matching_pairs(a: list, b: list) -> list:
    """(index in a, index in b) of the lines aligned: common head, difflib's middle, common tail."""
    head, tail = common_ends(a, b)
    pairs = [(i, i) for i in range(head)]
    middle_a, middle_b = a[head:len(a) - tail], b[head:len(b) - tail]
    if middle_a and middle_b and len(middle_a) * len(middle_b) <= ALIGN_LIMIT:
        matcher = difflib.SequenceMatcher(None, middle_a, middle_b, autojunk=False)
        for block in matcher.get_matching_blocks():
            pairs.extend((head + block.a + k, head + block.b + k) for k in range(block.size))
    pairs.extend((len(a) - tail + k, len(b) - tail + k) for k in range(tail))
    return pairs


# ------------------------------------------------------------------ building a folded group
def _build(unit: _Unit, follows: dict):
    shapes = [s for t in unit.templates for s in t.shapes]
    exact = [g for s in shapes for g in s.groups]
    if len(exact) == 1:
        return exact[0]
    kind = exact[0].kind
    members = [m for g in exact for m in g.members]
    if kind == "ranks":
        members.sort(key=lambda m: m.key)
    every = len(members)
    fields = slot_summaries(unit.slots, kind, follows)
    lines = []
    for (template, sources), summaries in zip(unit.slots, fields):
        printed = sum(t.size for t, _ in sources)
        keys = None if printed == every else tuple(sorted(
            (k for t, _ in sources for s in t.shapes for g in s.groups for k in g.keys), key=_key_order))
        lines.append(FoldedLine(template, summaries, keys, tuple(sources)))
    status, exit_code = unit.status
    return FoldedGroup(kind, tuple(members), tuple(m.key for m in members), status, tuple(lines),
                       tuple(exact), exit_code)


# ------------------------------------------------------------------ expansion
def _line_of(item, text: str, line: int) -> str:
    return fill(item.owner.templates[line], item.line_tokens(text, line))


def _find(lines: tuple, key) -> tuple:
    templates = {id(t): t for line in lines for t, _ in line.sources}
    for template in templates.values():
        for item in template.shapes:
            for index, group in enumerate(item.groups):
                if key in group.keys:
                    return item, index
    raise KeyError(key)


def _exact_of(group) -> tuple:
    return group.exact if isinstance(group, FoldedGroup) else (group,)


def _key_order(key):
    return (0, key, "") if isinstance(key, int) else (1, 0, str(key))
