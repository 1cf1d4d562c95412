"""Numbers in output text: find them, mask them, tell texts apart by their shape (pure).

A *number* is one of (ASCII digits only):
  - a decimal integer or float: ``12``, ``-3``, ``+0.5``, ``.5``, ``3.2E+05``, ``1e-3``. A sign
    belongs to the number only where it does not follow a letter, digit, ``_``, ``.``, ``)`` or
    ``]``: ``x=-1`` is one number, ``0-3`` two, ``lr-2`` the number 2;
  - ``nan``, ``inf`` or ``infinity`` in any case, standing alone as a word, optionally signed (by
    the same rule);
  - a hex id: ``0x7f3a`` (``0x`` or ``0X`` and hex digits).
Digits inside words count: ``cuda:1`` and ``worker3`` fold to ``cuda:{local_rank}``, ``worker{..}``.

A line's *template* is the line with each number replaced by ``MASK``; the tokens, exactly as
printed, fill it back (``fill``).

A text's *shape* is the text with every ASCII digit turned into ``0``. Where two texts have the
same shape, the number pattern finds its tokens at the same places in both (it tells digits
apart only in the ``0x`` of hex ids, see ``shape_is_safe``), so one scan of one text serves every
text of that shape: that is what makes folding 512 ranks cheap.
"""
from __future__ import annotations

import re

MASK = "\x00"   # stands for a number in a template; texts holding it are not folded
# Every number starts with one of [-+.0-9nNiI]: a leading character class lets the regex engine
# skip to candidates in C (twice as fast as a leading lookbehind); the lookbehinds that follow
# tell which character it was.
_EXPONENT = r"(?:[eE][-+]?[0-9]+)?"
_NUMBER = rf"""
    [-+.0-9nNiI]
    (?:
        (?<=0)[xX][0-9a-fA-F]+                                          # 0x7f3a
      | (?<=[0-9])[0-9]*(?:\.[0-9]+)?{_EXPONENT}                        # 12, 0.5, 3.2E+05
      | (?<=\.)[0-9]+{_EXPONENT}                                        # .5
      | (?<=[-+])(?<![A-Za-z0-9_.)\]][-+])                              # a sign where one may stand
        (?:(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+){_EXPONENT} | (?i:nan|inf(?:inity)?)(?![A-Za-z0-9_]))
      | (?<=[nN])(?<![A-Za-z0-9_][nN])(?i:an)(?![A-Za-z0-9_])             # nan
      | (?<=[iI])(?<![A-Za-z0-9_][iI])(?i:nf(?:inity)?)(?![A-Za-z0-9_])   # inf, infinity
    )
"""
NUMBER = re.compile(_NUMBER, re.VERBOSE)
_SPLIT = re.compile(f"({_NUMBER})", re.VERBOSE)
_TO_ZERO = str.maketrans("123456789", "000000000")

# Token kinds.
INT, FLOAT, SPECIAL, HEX = "int", "float", "special", "hex"


def mask_line(line: str) -> tuple[str, list[str]]:
    """ "step 10 loss 0.5" -> ("step \\0 loss \\0", ["10", "0.5"])."""
    pieces = _SPLIT.split(line)
    return MASK.join(pieces[0::2]), pieces[1::2]


def fill(template: str, tokens) -> str:
    """The line back from its template and its tokens (``mask_line``'s inverse)."""
    literals = template.split(MASK)
    if len(literals) != len(tokens) + 1:
        raise ValueError(f"template has {len(literals) - 1} fields, {len(tokens)} tokens given")
    out = [literals[0]]
    for token, literal in zip(tokens, literals[1:]):
        out.append(token)
        out.append(literal)
    return "".join(out)


def shape(text: str) -> str:
    """Every ASCII digit as 0: texts of one shape have their numbers at the same places."""
    return text.translate(_TO_ZERO)


def shape_is_safe(text_shape: str) -> bool:
    """False where a digit precedes an x: ``0x1f`` is one number, ``1x1f`` two, and the shape
    cannot tell them apart, so such texts are scanned one by one."""
    return "0x" not in text_shape and "0X" not in text_shape


def scan(text: str) -> tuple[str, list[int]]:
    """(the text with every number masked, [start, end, start, end, ...] of its numbers)."""
    spans: list[int] = []
    literals: list[str] = []
    position = 0
    for match in NUMBER.finditer(text):
        start, end = match.span()
        literals.append(text[position:start])
        spans.append(start)
        spans.append(end)
        position = end
    literals.append(text[position:])
    return MASK.join(literals), spans


def token_kind(token: str) -> str:
    """INT, FLOAT, SPECIAL (nan, inf) or HEX."""
    if "x" in token or "X" in token:
        return HEX
    if token[-1] in "nNfFyY":      # nan, inf, infinity
        return SPECIAL
    if "." in token or "e" in token or "E" in token:
        return FLOAT
    return INT


def label_before(literal: str) -> str:
    """The word a number follows, to name it: "step 3 loss " -> "loss"; "" when there is none."""
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_/.\-]*", literal[-40:])
    return words[-1].rstrip("./-") if words else ""
