"""The one parser of options, for every magic and command alike (pure, standard library only).

An ``Option`` is spelled one or more ways (``-np``, ``-n``) and fills one field; its kind turns
the text into a value or refuses it. Options come first: ``--`` or the first word that is not one
ends them, and what follows (a command kept as written, a script and its arguments) is the
caller's. Values come as ``--opt VALUE``, ``--opt=VALUE`` or, for a two-letter option,
``-fVALUE``. Bad input is one MlpMagicError naming the option and the value, never argparse's
usage and exit. ``$NAME`` is expanded from the environment first, then the notebook: an unknown
name is an error naming it, never an empty string passed on silently.

Kept lean: allrun's start-up imports this (no argparse, no dataclasses).
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping

from mlp_magic.core.records import Record
from mlp_magic.errors import MlpMagicError

OFF = "off"   # the kind of a flag that turns something off (``--no-group``: False)


class BadValue(ValueError):
    """A kind's refusal: its message says what was expected and what came."""


class Option(Record):
    names: tuple = ()         # its spellings, the first one named in messages
    dest: str = ""            # the field it fills
    kind: object = None       # None: a flag (True); OFF: False; else text -> value (BadValue)
    default: object = None
    repeat: bool = False      # may come again: the values in a tuple
    group: str = ""           # the options of one group exclude each other
    metavar: str = ""
    help: str = ""
    second: bool = False      # ``--copy SRC [DEST]``: the next word too, unless it is an option

    @property
    def takes_value(self) -> bool:
        return self.kind is not None and self.kind != OFF


class Options:
    """Parsed options: one attribute per option of the verb (its default when not given);
    ``given`` maps each field given to the spelling the user wrote."""

    def __init__(self, options, values: Mapping, given: Mapping | None = None):
        for option in options:
            flag_default = option.kind == OFF if option.kind in (None, OFF) else None
            setattr(self, option.dest, flag_default if option.default is None else option.default)
        for name, value in values.items():
            setattr(self, name, value)
        self.given = dict(given or {})

    def __eq__(self, other) -> bool:
        return isinstance(other, Options) and vars(self) == vars(other)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()) if k != "given")
        return f"Options({shown})"


# ---------------------------------------------------------------------------- kinds
def _ascii_digits(value: str) -> bool:
    """0-9 only: str.isdigit() accepts '²', which int() refuses."""
    return bool(value) and value.isascii() and value.isdigit()


def text(value: str) -> str:
    if not value.strip():
        raise BadValue(f"expected a non-empty value, got {value!r}")
    return value


def positive_int(most: int = 10 ** 9):
    def parse(value: str) -> int:
        digits = value.lstrip("0") if _ascii_digits(value) else ""
        if not digits or len(digits) > 18 or int(digits) > most:
            shown = f"{value[:20]!r}..." if len(value) > 20 else repr(value)
            limit = f" up to {most}" if most < 10 ** 9 else ""
            raise BadValue(f"expected a positive integer{limit}, got {shown}")
        return int(digits)
    return parse


def seconds(most: float = 1e9):
    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not 0 < number <= most:   # refuses nan, inf, zero and negatives
            limit = f" up to {most:g}" if most < 1e9 else ""
            raise BadValue(f"expected a positive number of seconds{limit}, got {value!r}")
        return number
    return parse


def number_in(low: float, high: float, what: str):
    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not low < number <= high:
            raise BadValue(f"expected {what} in ({low:g}, {high:g}], got {value!r}")
        return number
    return parse


def whole_number(value: str) -> int:
    """0, 1, 2...: a frame number (0 is the innermost)."""
    if not _ascii_digits(value) or len(value.lstrip("0")) > 9:
        raise BadValue(f"expected a frame number (0 is the innermost), got {value[:20]!r}")
    return int(value)


def python_name(value: str) -> str:
    import keyword

    if not value.isidentifier() or keyword.iskeyword(value):
        raise BadValue(f"expected a Python name, got {value!r}")
    return value


def python_names(value: str) -> tuple:
    """``model,opt``: Python names, comma-separated, each once."""
    names = tuple(dict.fromkeys(part.strip() for part in value.split(",")))
    if not names or "" in names:
        raise BadValue(f"expected Python names separated by commas, got {value!r}")
    return tuple(python_name(name) for name in names)


def rank_number(value: str) -> int:
    """0, 1, 2...: one rank."""
    if not _ascii_digits(value) or len(value.lstrip("0")) > 9:
        raise BadValue(f"expected a rank number, got {value[:20]!r}")
    return int(value)


def break_location(value: str):
    """``FILE:LINE`` (``cell:LINE`` for the cells) -> (file, line); ``clear`` stays itself."""
    if value == "clear":
        return value
    file, _, line = value.rpartition(":")
    if not file or not line.isdigit() or int(line) < 1:
        raise BadValue(f"expected FILE:LINE (cell:LINE for the cells) or clear, got {value!r}")
    return file, int(line)


def choice(*names: str):
    def parse(value: str) -> str:
        if value not in names:
            raise BadValue(f"expected one of {', '.join(names)}, got {value!r}")
        return value
    return parse


def matching(pattern: str, what: str):
    def parse(value: str) -> str:
        if not re.fullmatch(pattern, value):
            raise BadValue(f"not {what}: {value!r}")
        return value
    return parse


# ---------------------------------------------------------------------------- words
def split_words(line: str):
    """Shell-like words of ``line`` with the offset where each starts, one at a time (so what
    follows the options is never tokenized: a command is passed on exactly as written)."""
    index, length = 0, len(line)
    while True:
        while index < length and line[index].isspace():
            index += 1
        if index >= length:
            return
        start, word = index, []
        while index < length and not line[index].isspace():
            char = line[index]
            if char == "'":
                end = line.find("'", index + 1)
                if end < 0:
                    raise MlpMagicError(f"unclosed ' in {line.strip()!r}")
                word.append(line[index + 1:end])
                index = end + 1
            elif char == '"':
                index = _double_quoted(line, index + 1, word)
            elif char == "\\" and index + 1 < length:
                word.append(line[index + 1])
                index += 2
            else:
                word.append(char)
                index += 1
        yield "".join(word), start


def _double_quoted(line: str, index: int, word: list) -> int:
    while index < len(line):
        char = line[index]
        if char == '"':
            return index + 1
        if char == "\\" and index + 1 < len(line) and line[index + 1] in '"\\$`':
            word.append(line[index + 1])
            index += 2
        else:
            word.append(char)
            index += 1
    raise MlpMagicError(f'unclosed " in {line.strip()!r}')


def split_line(line: str, prog: str) -> list:
    """The words of ``line``, as a shell would split them."""
    try:
        return [word for word, _ in split_words(line)]
    except MlpMagicError as err:
        raise MlpMagicError(f"{prog}: cannot split {line.strip()!r}: {err}") from None


# ---------------------------------------------------------------------------- $NAME
_VAR = r"\$\$|\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)|\$\{"   # compiled when first used
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


def expand_vars(line: str, env: Mapping, user_ns: Mapping | None = None) -> str:
    """Replace ``$NAME``/``${NAME}`` (``$$`` is a literal ``$``)."""
    user_ns = user_ns or {}

    def replace(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group(0) == "${":
            raise MlpMagicError(f"unclosed '${{' in {line.strip()!r}")
        name = match.group(1) if match.group(1) is not None else match.group(2)
        if not re.fullmatch(_NAME, name):
            raise MlpMagicError(f"bad variable reference {match.group(0)!r} in {line.strip()!r}")
        if name in env:
            return str(env[name])
        if name in user_ns:
            return _as_text(name, user_ns[name])
        raise MlpMagicError(f"unknown variable ${name} in {line.strip()!r} "
                            "(not in the environment nor the notebook)")

    return re.sub(_VAR, replace, line)


def _as_text(name: str, value) -> str:
    """A notebook value as text; its own __str__ may fail, and that is bad input too."""
    try:
        return str(value)
    except Exception as err:  # any error in a user's __str__ becomes one clear message
        raise MlpMagicError(f"${name}: cannot turn the notebook's {type(value).__name__} "
                            f"into text: {err}") from None


# ---------------------------------------------------------------------------- parsing
class Parsed(Record):
    values: dict = None       # field -> value, for the options given
    given: dict = None        # field -> the spelling the user wrote
    rest: object = None       # where what follows the options starts (a word's position), or None
    dashes: bool = False      # ``--`` ended the options


def parse(words, options, prog: str, expand=None) -> Parsed:
    """``words``: (word, position) pairs, positions being argv indices or line offsets.
    ``expand``: applied to each option's value (the magics' ``$NAME``)."""
    by_name = {name: option for option in options for name in option.names}
    values, given, words, rest, dashes = {}, {}, _Words(words), None, False
    while (item := words.next()) is not None:
        word, position = item
        if word == "--":
            following = words.next()
            rest, dashes = (following[1] if following else None), True
            break
        if not word.startswith("-") or word == "-":
            rest = position
            break
        name, value = _split_option(word, by_name)
        option = by_name.get(name)
        if option is None:
            raise MlpMagicError(f"{prog}: unknown option {word!r}")
        _refuse_a_second_of_its_group(option, given, options, prog, name)
        if option.dest in given and not option.repeat:
            raise MlpMagicError(f"{prog}: {name} given twice")
        given[option.dest] = name
        value = _value(option, name, value, words, prog, expand)
        values[option.dest] = (*values.get(option.dest, ()), value) if option.repeat else value
    return Parsed(values=values, given=given, rest=rest, dashes=dashes)


def _value(option: Option, name: str, value, words, prog: str, expand):
    if not option.takes_value:
        if value is not None:
            raise MlpMagicError(f"{prog}: {name} takes no value (got {name}={value})")
        return option.kind != OFF
    if value is None:
        following = words.next()
        if following is None:
            raise MlpMagicError(f"{prog}: {name} needs a value")
        value = following[0]
    if expand is not None:
        value = expand(value)
    second = None
    if option.second:
        following = words.next()
        if following is not None and not following[0].startswith("-"):
            second = following[0] if expand is None else expand(following[0])
        elif following is not None:
            words.push(following)
    try:
        return (option.kind(value), second) if option.second else option.kind(value)
    except BadValue as err:
        raise MlpMagicError(f"{prog}: {name}: {err}".replace("\n", "\\n")) from None


def _split_option(word: str, by_name: dict) -> tuple:
    """``--fanout=8`` -> ("--fanout", "8"); ``-f8`` -> ("-f", "8"); ``-np`` -> ("-np", None)."""
    if word in by_name:
        return word, None
    name, sep, value = word.partition("=")
    if sep and name in by_name:
        return name, value
    short = by_name.get(word[:2])
    if len(word) > 2 and not word.startswith("--") and short is not None and short.takes_value:
        return word[:2], word[2:]
    return word, None


def _refuse_a_second_of_its_group(option: Option, given: dict, options, prog: str, name: str) -> None:
    if not option.group:
        return
    for other in options:
        if other.group == option.group and other.dest != option.dest and other.dest in given:
            raise MlpMagicError(f"{prog}: give either {given[other.dest]} or {name}, not both")


class _Words:
    """An iterator of (word, position) that can give one word back."""

    def __init__(self, words):
        self._words, self._back = iter(words), []

    def next(self):
        return self._back.pop() if self._back else next(self._words, None)

    def push(self, item) -> None:
        self._back.append(item)


def argv_words(argv) -> list:
    """A command's arguments as (word, index) pairs."""
    return [(word, index) for index, word in enumerate(argv)]


def usage(prog: str, options, rest: str = "") -> str:
    """``usage: prog [--a A] [-b] ... REST`` and one line per option with its help."""
    def spelled(option: Option, names) -> str:
        return names + (f" {option.metavar or option.dest.upper()}" if option.takes_value else "")

    shown = " ".join(f"[{spelled(o, o.names[0])}]" for o in options)
    rows = [(spelled(o, ", ".join(o.names)), o.help) for o in options]
    width = max((len(left) for left, _ in rows), default=0)
    lines = [f"usage: {prog} {shown}{' ' + rest if rest else ''}".rstrip()]
    lines += [f"  {left:<{width}}  {help_text}".rstrip() for left, help_text in rows]
    return "\n".join(lines) + "\n"
