"""Options the documents mention that the verbs do not take: the docs' check against the table.

A mention is a magic (``%mpirun``, ``%%allrun``...), a terminal command (``mlp-magic stacks``,
``allrun``) and the option words that follow it on the same line of Markdown, up to the end of
its code span, its table cell, or the first word that is not an option (a script, an expression,
the remote command: what follows is no longer ours). Only mentions in code count (a code span
or a fenced block): prose says "the mlp-magic command" without naming one. An option word that
none of the named magic's verbs (or the command's) takes is reported with its line. Option
words alone in prose (``--unblock``) are not checked: nothing says whose they are.
"""
from __future__ import annotations

import re
from typing import NamedTuple
from collections.abc import Iterator

from mlp_magic.commands.pure.parse import family
from mlp_magic.commands.pure.table import ALLRUN, COMMANDS, command_verb, verbs_of_magic

# %mpirun, %%mpirun, mlp-magic NAME, allrun: where a mention starts (not inside another word:
# `my-allrun`, `mlp_magic.allrun`)
_START = re.compile(r"(?<![\w./-])(%{1,2}(?:mpirun|allrun|mlp_stacks|mlp_doctor|mlp_cluster)\b|"
                    r"mlp-magic(?:\s+[a-z]+)?|allrun(?=\s+-))")
_FENCE = re.compile(r"^\s*(```|~~~)")
# Synopsis punctuation around words: [-np N], (--ranks SPEC), a|b
_PUNCTUATION = "[](){}|,;:`"
_NOT_OPTIONS = {"-", "--", "...", "-->"}


class Mention(NamedTuple):
    line: int          # 1-based
    whose: str         # "%mpirun", "mlp-magic stacks", "allrun"
    word: str          # the option word that is not one of theirs ("" for an unknown command)


def _options_of_magic(magic: str) -> dict:
    verbs = verbs_of_magic(magic)
    known = {}
    for form in ("line", "cell"):
        for option in family(verbs, form):
            for name in option.names:
                known[name] = option
    return known


def _options_of_verb(verb) -> dict:
    return {name: option for option in (*verb.options, *verb.magic_options, *verb.command_options)
            for name in option.names}


def _stops_after(magic: str, word: str) -> bool:
    """A flag whose verb takes the rest of the line (``--compare EXPR``, ``--pdb CMD``)."""
    return any(verb.flag is not None and word in verb.flag.names and verb.rest == "expression"
               for verb in verbs_of_magic(magic))


def _whose(start: str) -> tuple:
    """(label, known options or None for an unknown command, magic name or "")."""
    if start.startswith("%"):
        magic = start.lstrip("%")
        return start.replace("%%", "%"), _options_of_magic(magic), magic
    if start == "allrun":
        return "allrun", _options_of_verb(ALLRUN), ""
    name = start.split()[1] if len(start.split()) > 1 else ""
    verb = command_verb(name)
    if not name:
        return "mlp-magic", {"--help": None, "-h": None}, ""
    return f"mlp-magic {name}", None if verb is None else _options_of_verb(verb), ""


def _words(text: str) -> Iterator[str]:
    for raw in text.split():
        word = raw.strip(_PUNCTUATION)
        if word:
            yield word


def _unknown_in(rest: str, known: dict, magic: str) -> Iterator[str]:
    words = list(_words(rest))
    index = 0
    while index < len(words):
        word = words[index]
        if word in _NOT_OPTIONS or not word.startswith("-") or word[1:2].isdigit():
            return   # a script, an expression, a command, "--": no longer ours
        name = word.split("=", 1)[0]
        if name not in known:
            yield word
            return
        option = known[name]
        if option is None:
            return
        if magic and _stops_after(magic, name):
            return
        index += 2 if option.takes_value and "=" not in word else 1


def _region(line: str, start: int, in_fence: bool) -> str:
    """The words after a mention that belong to it: up to its code span's end, or its table cell's."""
    rest = line[start:]
    if not in_fence:
        rest = re.split(r"`|(?<!\\)\|", rest, maxsplit=1)[0]
    return rest


def unknown_options(text: str) -> list:
    """Every Mention of an option (or a ``mlp-magic`` command) the table does not know."""
    found = []
    in_fence = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        for match in _START.finditer(line):
            if not (in_fence or line.count("`", 0, match.start()) % 2):
                continue   # prose: "the mlp-magic command" names no command
            label, known, magic = _whose(match.group(1))
            if known is None:
                found.append(Mention(number, label, ""))
                continue
            rest = _region(line, match.end(), in_fence)
            found.extend(Mention(number, label, word) for word in _unknown_in(rest, known, magic))
    return found


def mention_text(mention: Mention) -> str:
    if not mention.word:
        commands = ", ".join(verb.command for verb in COMMANDS)
        return f"{mention.whose}: no such command (the commands: {commands})"
    return f"{mention.whose} {mention.word}: no such option"
