"""``%%mpirun``'s options: the parser and the MpirunArgs it gives (pure).

``$NAME`` expansion and the one-line parser are ``core.line_args``'s; this module adds the
options of ``%%mpirun`` and ``%mpirun``.
"""
from __future__ import annotations

import argparse
import functools
import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..core.line_args import LineParser, expand_vars, split_line
from ..errors import MlpMagicError

_DIGITS = re.compile(r"[0-9]+")  # ASCII only: str.isdigit() accepts '²', which int() refuses


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
def _mpirun_parser() -> LineParser:
    parser = LineParser(prog="%%mpirun", add_help=False, allow_abbrev=False)
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
    parser.add_argument("--pull", type=_identifier, metavar="NAME")
    parser.add_argument("--push", type=_identifier, metavar="NAME")
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
    pull: str | None = None
    push: str | None = None
    compare: str | None = None     # the expression: the rest of the line (see split_compare)


# --compare takes the rest of the line as a Python expression (no $NAME expansion, no shell
# quoting: "x['a']" stays as written); the options that may follow it are taken off its end.
_COMPARE = re.compile(r"(?:^|\s)--compare(?:=|\s+|$)")
_OPTION = r"(?:--ranks|--targets|-o|--out|--timeout)(?:\s+|=)\S+"
_AFTER_COMPARE = re.compile(rf"\s+{_OPTION}\s*$")
_BEFORE_EXPR = re.compile(rf"^\s*{_OPTION}\s+(?=\S)")


def split_compare(line: str) -> tuple:
    """"-o c --compare m.w[0] --ranks 1-3" -> ("-o c --ranks 1-3", "m.w[0]"); (line, None) without
    --compare. A quoted expression ("'a + b'") loses its quotes."""
    found = _COMPARE.search(line)
    if found is None:
        return line, None
    head, expr, tail = line[:found.start()], " " + line[found.end():], ""
    while (before := _BEFORE_EXPR.match(expr)) is not None:
        expr, head = " " + expr[before.end():], f"{head} {before.group(0)}"
    while (after := _AFTER_COMPARE.search(expr)) is not None:
        expr, tail = expr[:after.start()], after.group(0) + tail
    expr = expr.strip()
    if expr[:1] in "'\"" and expr[-1:] == expr[:1] and len(expr) > 1 and expr[0] not in expr[1:-1]:
        expr = expr[1:-1]
    if not expr.strip():
        raise MlpMagicError("%mpirun: --compare: give an expression, the rest of the line "
                            "(e.g. %mpirun --compare model.state_dict())")
    return head + tail, expr


def parse_mpirun_args(line: str, env: Mapping, user_ns: Mapping | None = None) -> MpirunArgs:
    line, compare = split_compare(line)
    expanded = expand_vars(line, env, user_ns)
    try:
        namespace = _mpirun_parser().parse_args(split_line(expanded, "%%mpirun"))
    except MlpMagicError as err:
        if expanded == line:
            raise
        # the user wrote $NAMES: show what they became, or "unrecognized arguments: 4" is a riddle
        raise MlpMagicError(f"{err} (the line {line.strip()!r} expanded to {expanded.strip()!r})") from None
    args = MpirunArgs(**vars(namespace), compare=compare)
    if sum([args.status, args.stop, args.restart, args.stacks]) > 1:
        raise MlpMagicError("%mpirun: give one of --status, --stop, --restart or --stacks")
    moving = [args.compare is not None, args.pull is not None, args.push is not None]
    if any(moving) and sum(moving) + args.status + args.stop + args.restart + args.stacks > 1:
        raise MlpMagicError("%mpirun: --compare, --pull and --push go alone "
                            "(not with each other, nor with --status, --stop, --restart or --stacks)")
    return args
