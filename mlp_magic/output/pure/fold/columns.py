"""A folded group's fields: every output's tokens of a field, cut out at once, and summarised (pure).

``slot_summaries`` takes the aligned lines of output/pure/fold/groups (slots: [template, [(Template, line
index), ...]]) and gives each line's ``fold_summary.FieldSummary`` tuple. Per Template, a chunk
of consecutive lines gives each text a row of tokens (``Shape.rows``: slices cut in C, or
``findall``), and ``zip`` turns the rows into one column per token. Tokens equal in every text
(``Template.constants``) are not cut at all. CHUNK_TOKENS bounds how many tokens exist at once.
"""
from __future__ import annotations

import re
from itertools import chain, repeat

from mlp_magic.output.pure.fold.numbers import FLOAT, HEX, INT, MASK, SPECIAL, shape, token_kind
from mlp_magic.output.pure.fold.summary import FieldSummary, summarise

CHUNK_TOKENS = 1 << 14       # tokens cut at once: small enough that a chunk's tokens stay in cache
_PLAIN = re.compile(r"[0-9.]*")


def slot_summaries(slots: list, kind: str, follows: dict) -> list:
    """Each slot's FieldSummary tuple; tokens sliced CHUNK_TOKENS or so at a time."""
    context = _Context(kind, follows)
    out: list = []
    chunk: list = []
    weight = 0
    for slot in slots:
        chunk.append(slot)
        weight += slot[0].count(MASK) * sum(t.size for t, _ in slot[1])
        if weight >= CHUNK_TOKENS:
            out.extend(_summarise_chunk(chunk, context))
            chunk, weight = [], 0
    out.extend(_summarise_chunk(chunk, context))
    return out


class _Context:
    """What every field of one folded group shares: per set of Templates (in the order their
    tokens are joined), the keys, the tokens a field holds if it follows the rank (or a map),
    and whether each output is one member's."""

    def __init__(self, kind: str, follows: dict):
        self.kind, self.follows = kind, follows
        self.known: dict = {}
        self.constants: dict = {}

    def constant(self, token: str):
        """The summary of a field equal everywhere (one object per token: many lines share it)."""
        found = self.constants.get(token)
        if found is None:
            found = self.constants[token] = summarise((token,), (None,))
        return found

    def follower(self, name: str):
        """The summary of a field that follows ``name`` ("{rank}"), one object for all."""
        return self.constants.setdefault(("follows", name), FieldSummary(f"{{{name}}}", varies=True))

    def keys_of(self, templates: tuple) -> tuple:
        found = self.known.get(templates)
        if found is None:
            single = all(g.count == 1 for t in templates for g in t.groups)
            keys = tuple(k for t in templates for g in t.groups for k in g.keys)
            found = self.known[templates] = (keys, _expected(keys, self.kind, self.follows), single)
        return found


def _summarise_chunk(slots: list, context: _Context) -> list:
    columns = _columns(slots, context)
    results = []
    for index, (template, _) in enumerate(slots):
        fields = []
        for field in range(template.count(MASK)):
            fields.append(_summarise_parts(columns[(index, field)], context))
        results.append(tuple(fields))
    return results


def _columns(slots: list, context: _Context) -> dict:
    """{(slot index, field): [(column of tokens, or the one token where none differ), Template]}."""
    wanted: dict = {}   # Template -> [(slot index, line)]; a chunk holds a run of each one's lines
    for index, (_, sources) in enumerate(slots):
        for template, line in sources:
            wanted.setdefault(template, []).append((index, line))
    columns: dict = {}
    for template, requests in wanted.items():
        first, end = requests[0][1], requests[-1][1] + 1
        starts = template.token_starts
        constants = template.constants(first, end)
        end_token = starts[end]
        selected = [k for k in range(starts[first], end_token) if k not in constants]
        by_token = _following(template, selected, context)
        cut = [k for k in selected if k not in by_token]
        if cut:   # a Template of one text has every token constant: rows always have company
            rows = template.rows(first, end, None if len(cut) == end_token - starts[first] else cut)
            by_token.update(zip(cut, zip(*rows)))
        for index, line in requests:
            for k in range(starts[line], starts[line + 1]):
                part = constants[k] if k in constants else by_token[k]
                columns.setdefault((index, k - starts[line]), []).append((part, template))
    return columns


def _following(template, selected: list, context: _Context) -> dict:
    """{token index: its tokens} for the tokens that equal each text's rank (or local or node
    rank), found in place."""
    _, expected, single = context.keys_of((template,))
    if not single or not expected:
        return {}
    found = {}
    for k in selected:
        tokens = template.follows_in_place(k, expected)
        if tokens is not None:
            found[k] = tokens
    return found


def _summarise_parts(parts: list, context: _Context):
    """One field's summary from its parts: per Template, its column of tokens (one per text), or
    its one token where no text differs."""
    templates = tuple(template for _, template in parts)
    keys, expected, single = context.keys_of(templates)
    first = parts[0][0]
    if isinstance(first, str) and all(column == first for column, _ in parts):
        return context.constant(first)     # the same token in every text of every part
    if single:
        name = _followed(parts, context)
        if name:
            return context.follower(name)
    if single and len(parts) <= 4:
        tokens = _per_output(*parts[0])
        for column, template in parts[1:]:
            tokens += _per_output(column, template)     # tuple + tuple: one copy in C
    elif single:
        tokens = tuple(chain.from_iterable(_per_output(column, t) for column, t in parts))
    else:
        tokens = tuple(token for column, t in parts
                       for token, group in zip(_per_output(column, t), t.groups)
                       for _ in range(group.count))
    layouts = [column if isinstance(column, str) else [column[i] for i in t.shape_starts]
               for column, t in parts]
    kinds, sortable = _kinds_and_order(tokens, layouts)
    return summarise(tokens, keys, sortable=sortable, follows=expected, kinds=kinds)


def _followed(parts: list, context: _Context) -> str | None:
    """The name every part follows: its column is the very tuple ``_following`` found (or the
    one token of a one-text Template equals it); None when some part does not."""
    names = None
    for column, template in parts:
        _, expected, _ = context.keys_of((template,))
        found = {name for name, tokens in expected if column is tokens
                 or (isinstance(column, str) and len(tokens) == 1 and tokens[0] == column)}
        names = found if names is None else names & found
        if not names:
            return None
    return next(name for name, _ in context.keys_of((parts[0][1],))[1] if name in names)


def _per_output(column, template) -> tuple:
    return (column,) * len(template.texts) if isinstance(column, str) else column


def _expected(keys: tuple, kind: str, follows: dict) -> list:
    """[(name, the tokens a field holds if it follows that name)]: rank, local_rank, node_rank."""
    if kind != "ranks":
        return []
    found = [("rank", tuple(map(str, keys)))]
    for name, mapping in follows.items():
        values = tuple(str(mapping[k]) for k in keys) if all(k in mapping for k in keys) else ()
        if len(set(values)) > 1:   # the same on every rank (one host's node_rank): a constant, no map's
            found.append((name, values))
    return found


def _kinds_and_order(tokens: tuple, layouts: list) -> tuple[set, bool]:
    """(the token kinds present, whether string order is numeric order), from the tokens of
    each shape's first text (a shape's tokens share their layout) or, where shapes are many,
    from all of them at once in C."""
    firsts = [t for layout in layouts for t in ([layout] if isinstance(layout, str) else layout)]
    if len(firsts) <= 8:
        shapes = set(map(shape, firsts))
        if len(shapes) == 1:    # one layout: one kind, and plain decimals sort as strings
            layout = shapes.pop()
            return {token_kind(layout)}, layout.replace(".", "", 1).isdigit()
        return {token_kind(t) for t in firsts}, False
    joined = "".join(tokens)
    kinds = _kinds_in(joined, len(tokens))
    plain = (_PLAIN.fullmatch(joined) is not None and "" not in tokens and len(set(map(len, tokens))) == 1
             and len(set(map(str.find, tokens, repeat(".")))) == 1)
    return kinds, plain


def _kinds_in(joined: str, count: int) -> set:
    """The kinds of ``count`` tokens joined into one string (letters tell them apart)."""
    hex_count = joined.count("x") + joined.count("X")
    if hex_count:
        return {HEX} if hex_count == count else {HEX, INT}
    kinds = set()
    if "n" in joined or "N" in joined:        # nan, inf, infinity all hold an n
        kinds.add(SPECIAL)
    if "." in joined or "e" in joined or "E" in joined:
        kinds.add(FLOAT)
    return kinds or {INT}
