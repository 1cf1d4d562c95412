"""The options of ``mlp-magic stacks`` and ``%mlp_stacks``: one parser for both (pure).

    [--hostfile FILE | -H HOSTS] [--pid PID[,PID...] | --match REGEX] [--native] [--threads]
    [--timeout S] [--ssh CMD] [--json]

Bad input is one MlpMagicError naming the option and the value.
"""
from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Mapping

from mlp_magic.core.line_args import LineParser, parse_magic_line
from mlp_magic.core.records import Record

USAGE = ("[--hostfile FILE | -H HOSTS] [--pid PID[,PID...] | --match REGEX] [--native] [--threads] "
         "[--timeout S] [--ssh CMD] [--json]")
MAX_PIDS = 4096
_PID = re.compile(r"[0-9]{1,10}")


class StacksOptions(Record):
    hostfile: str | None = None
    hosts: str | None = None        # -H
    pids: list | None = None        # --pid: exactly these processes, on every host
    match: str | None = None        # --match: Python processes whose command line matches
    native: bool = False            # --native: C/C++ frames too
    threads: bool = False           # --threads: idle threads too
    timeout: float = 10.0           # one deadline for every host
    ssh: str | None = None
    json: bool = False


def _pids(text: str) -> list:
    pieces = [p.strip() for p in text.split(",")]
    bad = next((p for p in pieces if not _PID.fullmatch(p) or int(p) == 0), None)
    if bad is not None:
        raise argparse.ArgumentTypeError(f"expected process ids such as 1234,1240, got {text!r}"
                                         f" ({bad!r} is not one)")
    if len(pieces) > MAX_PIDS:
        raise argparse.ArgumentTypeError(f"at most {MAX_PIDS} process ids, got {len(pieces)}")
    return sorted({int(p) for p in pieces})


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except (re.error, RecursionError, OverflowError) as err:
        raise argparse.ArgumentTypeError(f"not a regular expression: {text!r} ({err})") from None
    if not text:
        raise argparse.ArgumentTypeError("an empty pattern matches every Python process; give one")
    return text


MAX_TIMEOUT = 86400   # a day: beyond it, poll's and the thread waits' limits would be hit


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value > MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(
            f"expected a positive number of seconds up to {MAX_TIMEOUT}, got {text!r}")
    return value


def add_stacks_arguments(parser: argparse.ArgumentParser) -> None:
    """The options, for the command's subparser and the magic's parser alike."""
    hosts = parser.add_mutually_exclusive_group()
    hosts.add_argument("--hostfile", help="an MPI hostfile (else the environment's hosts, else this machine)")
    hosts.add_argument("-H", "--hosts", help="host list such as worker[0-3]")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--pid", dest="pids", type=_pids, metavar="PID[,PID...]",
                       help="these processes (on every host asked), not the ranks")
    which.add_argument("--match", type=_regex, metavar="REGEX",
                       help="Python processes whose command line matches, not the ranks")
    parser.add_argument("--native", action="store_true", help="C/C++ frames too (py-spy --native)")
    parser.add_argument("--threads", action="store_true", help="show idle threads too")
    parser.add_argument("--timeout", type=_seconds, default=StacksOptions.timeout,
                        help="seconds for every host to answer, one deadline (10)")
    parser.add_argument("--ssh", help="ssh client for other hosts (default $MLP_MAGIC_SSH or ssh)")
    parser.add_argument("--json", action="store_true", help="print every process's stacks as JSON")


def options_from(namespace: argparse.Namespace) -> StacksOptions:
    fields = StacksOptions._fields
    return StacksOptions(**{name: value for name, value in vars(namespace).items() if name in fields})


@functools.lru_cache(maxsize=None)
def _magic_parser() -> LineParser:
    parser = LineParser(prog="%mlp_stacks", add_help=False, allow_abbrev=False)
    add_stacks_arguments(parser)
    return parser


def parse_stacks_line(line: str, env: Mapping, user_ns: Mapping | None = None) -> StacksOptions:
    """``%mlp_stacks``'s line ($NAMES expanded as in every magic) -> StacksOptions."""
    return options_from(parse_magic_line(_magic_parser(), USAGE, line, env, user_ns))
