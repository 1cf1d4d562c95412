"""Magic and command lines: ``$VAR`` expansion, shell-like splitting, one-line argparse (pure).

``%%mpirun -np $MLP_MPI_NP`` must work as written, so ``$NAME`` and ``${NAME}`` are expanded
from os.environ first, then from the user's namespace; an unknown name is an error naming it,
never an empty string passed on silently. A parser error is one MlpMagicError naming the
program, never argparse's usage text and exit.
"""
from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Mapping

from mlp_magic.errors import MlpMagicError

_VAR = re.compile(r"\$\$|\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)|\$\{")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def expand_vars(line: str, env: Mapping, user_ns: Mapping | None = None) -> str:
    """Replace ``$NAME``/``${NAME}`` (``$$`` is a literal ``$``)."""
    user_ns = user_ns or {}

    def replace(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        if match.group(0) == "${":
            raise MlpMagicError(f"unclosed '${{' in {line.strip()!r}")
        name = match.group(1) if match.group(1) is not None else match.group(2)
        if not _NAME.match(name):
            raise MlpMagicError(f"bad variable reference {match.group(0)!r} in {line.strip()!r}")
        if name in env:
            return str(env[name])
        if name in user_ns:
            return _as_text(name, user_ns[name])
        raise MlpMagicError(f"unknown variable ${name} in {line.strip()!r} "
                            "(not in the environment nor the notebook)")

    return _VAR.sub(replace, line)


def _as_text(name: str, value) -> str:
    """A notebook value as text; its own __str__ may fail, and that is bad input too."""
    try:
        return str(value)
    except Exception as err:  # any error in a user's __str__ becomes one clear message
        raise MlpMagicError(f"${name}: cannot turn the notebook's {type(value).__name__} "
                            f"into text: {err}") from None


class LineParser(argparse.ArgumentParser):
    """argparse that raises one MlpMagicError instead of printing usage and exiting."""

    def error(self, message):  # noqa: D401 - argparse hook
        raise MlpMagicError(self.one_line(message)) from None

    def one_line(self, message: str) -> str:
        # One line, not argparse's chain; a value holding a newline shows it as \n.
        return f"{self.prog}: " + message.replace("\n", "\\n")

    def exit(self, status=0, message=None):
        raise MlpMagicError(f"{self.prog}: {message or 'stopped'}".strip()) from None


def split_line(line: str, prog: str) -> list:
    try:
        return shlex.split(line)
    except ValueError as err:
        raise MlpMagicError(f"{prog}: cannot split {line.strip()!r}: {err}") from None


def parse_magic_line(parser: argparse.ArgumentParser, usage: str, line: str, env: Mapping,
                     user_ns: Mapping | None = None) -> argparse.Namespace:
    """A line magic's line ($NAMES expanded, split like a shell) -> ``parser``'s namespace; bad
    input is one MlpMagicError starting with the magic's name (``parser.prog``) and ending with its
    usage, showing what the line became when $NAMES changed it."""
    prog, line = parser.prog, line or ""
    expanded = line
    try:
        expanded = expand_vars(line, env, user_ns)
        return parser.parse_args(split_line(expanded, prog))
    except MlpMagicError as err:
        prefix = "" if str(err).startswith(prog) else f"{prog}: "
        # the user wrote $NAMES: show what they became, or "unrecognized arguments: 4" is a riddle
        became = f" (the line {line.strip()!r} expanded to {expanded.strip()!r})" if expanded != line else ""
        raise MlpMagicError(f"{prefix}{err}{became} (usage: {prog} {usage})") from None
