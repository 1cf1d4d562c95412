"""Where the numbers of many outputs are, found with as few scans as possible (pure).

- ``Shape``: exact outputs with the same shape (``fold_numbers.shape``: digits as 0) have their
  numbers at the same places, so one regex scan of the first gives the spans of all of them,
  and tokens are cut out of every text with slices. An output alone in its shape is not scanned
  for spans at all: its tokens come from ``findall`` over the lines asked for, in C.
- ``Template``: shapes whose lines are the same once numbers are masked. Its texts have the same
  number of tokens on each line, so a range of lines gives every text a row of tokens of the
  same length, and ``zip`` turns the rows into one column per token.
"""
from __future__ import annotations

from array import array
from itertools import accumulate, repeat
from operator import add, itemgetter

from mlp_magic.output.pure.fold.numbers import MASK, NUMBER, scan, shape, shape_is_safe

_NONZERO_IS_ONE = bytes([0] + [1] * 255)


class Shape:
    """Exact outputs of one shape."""

    __slots__ = ("groups", "texts", "templates", "spans", "line_starts", "owner", "_varying")

    def __init__(self, group, text: str):
        self.groups, self.texts = [group], [text]
        self.templates = self.spans = self.line_starts = None
        self.owner = None      # its Template
        self._varying = False

    def analyse(self) -> list:
        """The masked lines; keeps the spans (several texts) or the line starts (one text)."""
        text = self.texts[0]
        if len(self.texts) > 1:
            masked, spans = scan(text)
            self.spans = array("q", spans)
        else:
            masked = NUMBER.sub(MASK, text)
            lengths = map(add, map(len, text.split("\n")), repeat(1))   # each line and its newline
            self.line_starts = array("q", accumulate(lengths, initial=0))
        return masked.split("\n")

    def varying(self):
        """Bytes with 1 wherever some text differs from the first (None: not known).

        The texts differ only in digits; XOR-ing them as big integers finds where, in C, so
        fields equal on every rank are never sliced."""
        if self._varying is False:
            self._varying = None
            if len(self.texts) > 1 and all(text.isascii() for text in self.texts):
                first = int.from_bytes(self.texts[0].encode("ascii"), "little")
                differ = 0
                for text in self.texts[1:]:
                    differ |= int.from_bytes(text.encode("ascii"), "little") ^ first
                size = len(self.texts[0])
                self._varying = differ.to_bytes(size, "little").translate(_NONZERO_IS_ONE)
        return self._varying

    def token_slice(self, index: int) -> slice:
        return slice(self.spans[2 * index], self.spans[2 * index + 1])

    def line_tokens(self, text: str, line: int) -> list:
        """The tokens of one line of one of its texts."""
        start, end = self.owner.token_starts[line], self.owner.token_starts[line + 1]
        if self.spans is None:
            return NUMBER.findall(text, self.line_starts[line], self.line_starts[line + 1])
        return [text[self.token_slice(k)] for k in range(start, end)]

    def rows(self, first_line: int, end_line: int, selected: list | None) -> list:
        """One row per text: the tokens ``selected`` (None: all) of lines [first_line, end_line)."""
        starts = self.owner.token_starts
        if self.spans is None:
            row = NUMBER.findall(self.texts[0], self.line_starts[first_line], self.line_starts[end_line])
            return [row if selected is None else [row[k - starts[first_line]] for k in selected]]
        if selected is None:
            selected = range(starts[first_line], starts[end_line])
        if len(selected) == 1:
            one = self.token_slice(selected[0])
            return [(text[one],) for text in self.texts]
        getter = itemgetter(*[self.token_slice(k) for k in selected])
        return [getter(text) for text in self.texts]


class Template:
    """Shapes whose masked lines are the same: one block of lines to align and summarise."""

    __slots__ = ("status", "exit_code", "templates", "ends_newline", "shapes", "size", "first",
                 "token_starts", "texts", "groups", "shape_starts")

    def __init__(self, status, exit_code, templates: tuple, ends_newline: bool):
        self.status, self.exit_code = status, exit_code
        self.templates, self.ends_newline = templates, ends_newline
        self.token_starts = array("q", accumulate((line.count(MASK) for line in templates), initial=0))
        self.shapes: list = []
        self.texts: list = []      # every shape's texts, in shape order
        self.groups: list = []     # their exact groups, in the same order
        self.shape_starts: list = []
        self.size, self.first = 0, None

    def add(self, item: Shape, first: int) -> None:
        self.shape_starts.append(len(self.texts))
        self.shapes.append(item)
        self.texts.extend(item.texts)
        self.groups.extend(item.groups)
        self.size += sum(g.count for g in item.groups)
        self.first = first if self.first is None else min(self.first, first)
        item.owner = self

    def constants(self, first_line: int, end_line: int) -> dict:
        """{token index: token} for the tokens of lines [first_line, end_line) equal in every text,
        as far as the shapes' ``varying`` bytes can tell (a text alone in its shape tells nothing)."""
        start, end = self.token_starts[first_line], self.token_starts[end_line]
        if len(self.texts) == 1:
            return dict(zip(range(start, end), self.shapes[0].rows(first_line, end_line, None)[0]))
        masks = [item.varying() for item in self.shapes]
        if any(mask is None for mask in masks):
            return {}
        found = {}
        for k in range(start, end):
            cuts = [item.token_slice(k) for item in self.shapes]
            if all(mask.find(1, cut.start, cut.stop) < 0 for mask, cut in zip(masks, cuts)):
                tokens = {item.texts[0][cut] for item, cut in zip(self.shapes, cuts)}
                if len(tokens) == 1:
                    found[k] = tokens.pop()
        return found

    def rows(self, first_line: int, end_line: int, selected: list | None) -> list:
        return [row for item in self.shapes for row in item.rows(first_line, end_line, selected)]

    def follows_in_place(self, index: int, expected: list) -> tuple | None:
        """The tokens at ``index`` if, text by text, they equal one of ``expected`` ([(name, one
        token per text)], e.g. each text's rank): checked with ``startswith`` where the token
        sits, so a field that prints the rank on every line is never cut out of the texts."""
        if not expected or any(item.spans is None for item in self.shapes):
            return None
        first = self.shapes[0]
        token = first.texts[0][first.token_slice(index)]
        for _, tokens in expected:
            if tokens[0] == token and all(
                    _in_place(item, index, tokens[start:start + len(item.texts)])
                    for item, start in zip(self.shapes, self.shape_starts)):
                return tokens
        return None


def _in_place(item: Shape, index: int, tokens: tuple) -> bool:
    cut = item.token_slice(index)
    return (set(map(len, tokens)) == {cut.stop - cut.start}
            and all(map(str.startswith, item.texts, tokens, repeat(cut.start))))


def text_of(group) -> str:
    pieces = group.text_pieces
    return pieces[0] if len(pieces) == 1 else "".join(pieces)


def shapes_of(groups) -> tuple[list, list]:
    """(the Shape list, the groups that cannot fold: their text holds MASK itself)."""
    by_key: dict = {}
    unsafe: set = set()    # shapes that cannot be shared: each of their texts is scanned alone
    kept = []
    for group in groups:
        text = text_of(group)
        if MASK in text:
            kept.append(group)
            continue
        key = (group.status, group.exit_code, shape(text))
        found = by_key.get(key)
        if found is None and key not in unsafe and not shape_is_safe(key[2]):
            unsafe.add(key)    # one check per shape: the texts of one shape agree on it
        if key in unsafe:
            key = id(group)
        if found is None:
            by_key[key] = Shape(group, text)
        else:
            found.groups.append(group)
            found.texts.append(text)
    return list(by_key.values()), kept


def templates_of(shapes: list, order: dict) -> list:
    """The Templates of these shapes; ``order``: {id(exact group): its place in the input}."""
    interned: dict = {}
    by_key: dict = {}
    for item in shapes:
        lines = item.analyse()
        ends = len(lines) > 1 and lines[-1] == ""
        if ends:
            lines.pop()
        lines = tuple(map(interned.setdefault, lines, lines))   # one string object per template
        first = item.groups[0]
        key = (first.status, first.exit_code, ends, lines)
        template = by_key.get(key)
        if template is None:
            template = by_key[key] = Template(first.status, first.exit_code, lines, ends)
        template.add(item, min(order[id(g)] for g in item.groups))
    return list(by_key.values())
