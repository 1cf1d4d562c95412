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
    parser.add_argument("--no-fold", dest="fold", action="store_false")
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
    fold: bool = True
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
