"""Argument lines of the magics: ``$VAR`` expansion and option parsing (pure).

``%%mpirun -np $MLP_MPI_NP`` must work as written, so ``$NAME`` and ``${NAME}`` are expanded
from os.environ first, then from the user's namespace; an unknown name is an error naming it,
never an empty string passed on silently.
"""
from __future__ import annotations

import argparse
import functools
import keyword
import re
import shlex
from dataclasses import dataclass
from typing import Mapping

from .errors import MlpMagicError

_VAR = re.compile(r"\$\$|\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)|\$\{")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit() accepts '²', which int() refuses


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


class _Parser(argparse.ArgumentParser):
    """argparse that raises one MlpMagicError instead of printing usage and exiting."""

    def error(self, message):  # noqa: D401 - argparse hook
        # One line, not argparse's chain; a value holding a newline shows it as \n.
        raise MlpMagicError(f"{self.prog}: " + message.replace("\n", "\\n")) from None

    def exit(self, status=0, message=None):
        raise MlpMagicError(f"{self.prog}: {message or 'stopped'}".strip()) from None


def split_line(line: str, prog: str) -> list:
    try:
        return shlex.split(line)
    except ValueError as err:
        raise MlpMagicError(f"{prog}: cannot split {line.strip()!r}: {err}") from None


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    digits = text.lstrip("0") if _DIGITS.fullmatch(text) else ""
    if not digits:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if len(digits) > 18:  # int() refuses strings over 4,300 digits; no World has 10**18 ranks
        raise argparse.ArgumentTypeError(f"{text[:20]!r}... is far too large")
    return int(digits)


def _identifier(text: str) -> str:
    if not text.isidentifier() or keyword.iskeyword(text):
        raise argparse.ArgumentTypeError(f"expected a Python name, got {text!r}")
    return text


def add_host_options(parser: argparse.ArgumentParser) -> None:
    """Host selection shared by %%mpirun, %allrun and the commands."""
    hosts = parser.add_mutually_exclusive_group()
    hosts.add_argument("--hostfile", "--machinefile", dest="hostfile", metavar="FILE")
    hosts.add_argument("-H", "--host", dest="hosts", metavar="HOSTS")


@functools.lru_cache(maxsize=None)
def _mpirun_parser() -> _Parser:
    parser = _Parser(prog="%%mpirun", add_help=False, allow_abbrev=False)
    parser.add_argument("-np", "-n", dest="np", type=_positive_int)
    add_host_options(parser)
    parser.add_argument("--oversubscribe", action="store_true")
    parser.add_argument("--ranks", "--targets", dest="ranks")
    parser.add_argument("--timeout", type=_positive_float)
    parser.add_argument("--no-group", dest="group", action="store_false")
    parser.add_argument("--diff", action="store_true")
    parser.add_argument("--all-outputs", dest="all_outputs", action="store_true",
                        help="show rich outputs (display, plots, last value) of every rank, not only rank 0")
    parser.add_argument("-o", "--out", dest="out", type=_identifier)
    parser.add_argument("--log-dir", dest="log_dir")
    parser.add_argument("--restart", action="store_true")
    parser.add_argument("--status", action="store_true")
    parser.add_argument("--stop", action="store_true")
    parser.add_argument("--stacks", action="store_true")
    return parser


@dataclass
class MpirunArgs:
    np: int | None = None
    hostfile: str | None = None
    hosts: str | None = None
    oversubscribe: bool = False
    ranks: str | None = None
    timeout: float | None = None
    group: bool = True
    diff: bool = False
    all_outputs: bool = False
    out: str | None = None
    log_dir: str | None = None
    restart: bool = False
    status: bool = False
    stop: bool = False
    stacks: bool = False


def parse_mpirun_args(line: str, env: Mapping, user_ns: Mapping | None = None) -> MpirunArgs:
    expanded = expand_vars(line, env, user_ns)
    try:
        namespace = _mpirun_parser().parse_args(split_line(expanded, "%%mpirun"))
    except MlpMagicError as err:
        if expanded == line:
            raise
        # the user wrote $NAMES: show what they became, or "unrecognized arguments: 4" is a riddle
        raise MlpMagicError(f"{err} (the line {line.strip()!r} expanded to {expanded.strip()!r})") from None
    args = MpirunArgs(**vars(namespace))
    if sum([args.status, args.stop, args.restart, args.stacks]) > 1:
        raise MlpMagicError("%mpirun: give one of --status, --stop, --restart or --stacks")
    return args
