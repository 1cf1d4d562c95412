"""A folded group's fields: every output's tokens of a field, sliced at once, and summarised (pure).

``slot_summaries`` takes the aligned lines of core/fold (slots: [template, [(_Template, line
index), ...]]) and gives each line's ``fold_summary.FieldSummary`` tuple. Per shape (outputs
whose numbers sit at the same places), one ``itemgetter`` of slices cuts a whole chunk of
tokens out of every text in C, and ``zip`` turns the rows into columns; fields where no output
differs (the shape's ``varying`` bytes say so) are not sliced at all. CHUNK_TOKENS bounds how
many tokens exist at once.
"""
from __future__ import annotations

from operator import itemgetter

from .fold_numbers import MASK
from .fold_summary import summarise

CHUNK_TOKENS = 1 << 18       # tokens sliced at once (bounds the memory of a summary pass)


def slot_summaries(slots: list, kind: str, follows: dict) -> list:
    """Each slot's FieldSummary tuple; tokens sliced CHUNK_TOKENS or so at a time."""
    out: list = []
    chunk: list = []
    weight = 0
    for slot in slots:
        chunk.append(slot)
        weight += slot[0].count(MASK) * sum(t.size for t, _ in slot[1])
        if weight >= CHUNK_TOKENS:
            out.extend(_summarise_chunk(chunk, kind, follows))
            chunk, weight = [], 0
    out.extend(_summarise_chunk(chunk, kind, follows))
    return out


def _summarise_chunk(slots: list, kind: str, follows: dict) -> list:
    columns = _columns(slots)
    results = []
    for index, (template, sources) in enumerate(slots):
        fields = []
        for field in range(template.count(MASK)):
            parts = columns[(index, field)]
            fields.append(_summarise_parts(parts, kind, follows))
        results.append(tuple(fields))
    return results


def _columns(slots: list) -> dict:
    """{(slot index, field): [(tokens of one shape, or its one token where none differ), _Shape]}."""
    wanted: dict = {}   # _Shape -> [(slot index, first token, token count)]
    for index, (_, sources) in enumerate(slots):
        for template, j in sources:
            for item in template.shapes:
                start, end = item.token_range(j)
                if end > start:
                    wanted.setdefault(item, []).append((index, start, end))
    columns: dict = {}
    for item, requests in wanted.items():
        spans, varying, first = item.spans, item.varying(), item.texts[0]
        slices, places = [], []
        for index, start, end in requests:
            for k in range(start, end):
                where = (index, k - start)
                token = slice(spans[2 * k], spans[2 * k + 1])
                if varying is None or varying.find(1, token.start, token.stop) >= 0:
                    slices.append(token)
                    places.append(where)
                else:
                    columns.setdefault(where, []).append((first[token], item))
        if slices:
            getter = itemgetter(*slices)
            rows = [getter(text) for text in item.texts]
            by_token = zip(*rows) if len(slices) > 1 else [tuple(rows)]
            for where, column in zip(places, by_token):
                columns.setdefault(where, []).append((column, item))
    return columns


def _summarise_parts(parts: list, kind: str, follows: dict):
    """One field's summary from its parts: a column of tokens, or one token, per shape."""
    if len(parts) == 1 and _single_keys(parts[0][1], kind, follows):
        tokens, item = parts[0]
        if isinstance(tokens, str):
            return summarise((tokens,), (item.keys[0],))
        return summarise(tokens, item.keys, sortable=_plain_decimal(tokens[0]), follows=item.strings)
    tokens, keys = [], []
    for column, item in parts:
        if isinstance(column, str):
            tokens.extend([column] * sum(g.count for g in item.groups))
            keys.extend(k for g in item.groups for k in g.keys)
            continue
        for token, group in zip(column, item.groups):
            tokens.extend([token] * group.count)
            keys.extend(group.keys)
    return summarise(tuple(tokens), tuple(keys), follows=_expected(tuple(keys), kind, follows))


def _single_keys(item, kind: str, follows: dict) -> bool:
    """True when each output of the shape is one member's; sets its keys and follows' tokens once."""
    if item.keys is None:
        single = all(g.count == 1 for g in item.groups)
        item.keys = tuple(g.keys[0] for g in item.groups) if single else ()
        item.strings = _expected(item.keys, kind, follows) if single else []
    return bool(item.keys)


def _expected(keys: tuple, kind: str, follows: dict) -> list:
    """[(name, the tokens a field holds if it follows that name)]: rank, local_rank, node_rank."""
    if kind != "ranks":
        return []
    found = [("rank", tuple(map(str, keys)))]
    for name, mapping in follows.items():
        if all(k in mapping for k in keys):
            found.append((name, tuple(str(mapping[k]) for k in keys)))
    return found


def _plain_decimal(token: str) -> bool:
    """Digits with at most one point: among tokens of one shape, string order is numeric order."""
    return token.replace(".", "", 1).isdigit()
