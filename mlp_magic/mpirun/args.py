"""``%%mpirun``'s options: the parser and the MpirunArgs it gives (pure).

``$NAME`` expansion and the one-line parser are ``core.line_args``'s; this module adds the
options of ``%%mpirun`` and ``%mpirun``. ``%mpirun [options] script.py [args...]``: the first
word that is neither an option nor an option's value is the script, and everything after it
is the script's (``%mpirun train.py --timeout 3`` gives ``--timeout 3`` to train.py).
"""
from __future__ import annotations

import argparse
import functools
import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass

from mlp_magic.core.line_args import LineParser, expand_vars, split_line
from mlp_magic.errors import MlpMagicError

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


def _frame_number(text: str) -> int:
    if not _DIGITS.fullmatch(text) or len(text.lstrip("0")) > 9:
        raise argparse.ArgumentTypeError(f"expected a frame number (0 is the innermost), got {text[:20]!r}")
    return int(text)


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
    parser.add_argument("--post-mortem", dest="post_mortem", action="store_true")
    parser.add_argument("--frame", type=_frame_number)
    parser.add_argument("--where", action="store_true")
    parser.add_argument("--pull", type=_identifier, metavar="NAME")
    parser.add_argument("--push", type=_identifier, metavar="NAME")
    return parser


def split_script(words: list, parser: argparse.ArgumentParser) -> tuple:
    """(the options, [script, its arguments...] or []): the script is the first word that is
    neither an option of ours nor the value of one. ``--`` may mark where it starts."""
    takes_value = {name: action.nargs != 0 for name, action in parser._option_string_actions.items()}
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            return words[:index], words[index + 1:]
        if not word.startswith("-") or word == "-":
            return words[:index], words[index:]
        name = word.split("=", 1)[0]
        index += 2 if takes_value.get(name) and "=" not in word else 1
    return words, []


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
    post_mortem: bool = False
    frame: int | None = None
    where: bool = False
    script: str | None = None
    script_args: tuple = ()
    pull: str | None = None
    push: str | None = None
    compare: str | None = None     # the expression: the rest of the line (see split_compare)


# --compare takes the rest of the line as a Python expression (no $NAME expansion, no shell
# quoting: "x['a']" stays as written); the options that may follow it are taken off its end.
_COMPARE = re.compile(r"(?:^|\s)--compare(?:=|\s+|$)")
_OPTION = r"(?:--ranks|--targets|-o|--out|--timeout)(?:\s+|=)\S+"
_AFTER_COMPARE = re.compile(rf"\s+{_OPTION}\s*$")
_BEFORE_EXPR = re.compile(rf"^\s*{_OPTION}\s+(?=\S)")


def _script_before(head: str) -> bool:
    """Is there a script among the words before --compare (which then is the script's)?"""
    try:
        return bool(split_script(split_line(head, "%mpirun"), _mpirun_parser())[1])
    except MlpMagicError:   # unbalanced quotes...: the full parse says so
        return False


def split_compare(line: str) -> tuple:
    """"-o c --compare m.w[0] --ranks 1-3" -> ("-o c --ranks 1-3", "m.w[0]"); (line, None) without
    --compare. A quoted expression ("'a + b'") loses its quotes."""
    found = _COMPARE.search(line)
    if found is None or _script_before(line[:found.start()]):
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
        options, script = split_script(split_line(expanded, "%%mpirun"), _mpirun_parser())
        namespace = _mpirun_parser().parse_args(options)
    except MlpMagicError as err:
        if expanded == line:
            raise
        # the user wrote $NAMES: show what they became, or "unrecognized arguments: 4" is a riddle
        raise MlpMagicError(f"{err} (the line {line.strip()!r} expanded to {expanded.strip()!r})") from None
    args = MpirunArgs(**vars(namespace), compare=compare, script=script[0] if script else None,
                      script_args=tuple(script[1:]))
    if sum([args.status, args.stop, args.restart, args.stacks]) > 1:
        raise MlpMagicError("%mpirun: give one of --status, --stop, --restart or --stacks")
    moving = [args.compare is not None, args.pull is not None, args.push is not None]
    if any(moving) and sum(moving) + args.status + args.stop + args.restart + args.stacks > 1:
        raise MlpMagicError("%mpirun: --compare, --pull and --push go alone "
                            "(not with each other, nor with --status, --stop, --restart or --stacks)")
    _refuse_mixed_debugging(args)
    if any(moving):
        _refuse_beside_values(args)
    return args


# what --compare, --pull and --push do not use: given, it would be silently ignored
_NOT_FOR_VALUES = {"np": "-np", "hostfile": "--hostfile", "hosts": "-H", "oversubscribe": "--oversubscribe",
                   "diff": "--diff", "all_outputs": "--all-outputs", "log_dir": "--log-dir"}


def _refuse_beside_values(args: MpirunArgs) -> None:
    given = [flag for name, flag in _NOT_FOR_VALUES.items() if getattr(args, name)]
    given += ["--no-group"] * (not args.group) + ["--no-fold"] * (not args.fold)
    if given:
        raise MlpMagicError(f"%mpirun: {given[0]} does not go with --compare, --pull or --push, which use "
                            "the running World (only --ranks, -o and --timeout do)")
    words = set(args.compare.split()) if args.compare else set()
    ours = sorted(words & set(_mpirun_parser()._option_string_actions))
    if ours:
        raise MlpMagicError(f"%mpirun: --compare takes the rest of the line, {ours[0]} included; "
                            "put it before --compare, or drop it")


_WORLD_OPTIONS = ("np", "hostfile", "hosts", "oversubscribe", "restart")


def _refuse_mixed_debugging(args: MpirunArgs) -> None:
    """A script, --post-mortem and --where exclude each other and the other line forms; the two
    inspections look at the running World, so options that would start another are refused."""
    given = {"a script": args.script, "--post-mortem": args.post_mortem, "--where": args.where,
             "--status": args.status, "--stop": args.stop, "--stacks": args.stacks,
             "--compare": args.compare is not None, "--pull": args.pull, "--push": args.push}
    named = [name for name, value in given.items() if value]
    if len(named) > 1:
        raise MlpMagicError(f"%mpirun: {' and '.join(named[:2])} do not go together")
    if args.frame is not None and not args.post_mortem:
        raise MlpMagicError("%mpirun: --frame goes with --post-mortem (%%mpirun --post-mortem --frame K)")
    if args.post_mortem or args.where:
        world = [name for name in _WORLD_OPTIONS if getattr(args, name)]
        if world:
            option = {"np": "-np", "hostfile": "--hostfile", "hosts": "-H"}.get(world[0], f"--{world[0]}")
            raise MlpMagicError(f"%mpirun: {option} does not go with --post-mortem or --where, which "
                                "inspect the running World")


def check_form(args: MpirunArgs, cell: bool) -> None:
    """Which options belong to the cell form (%%mpirun) and which to the line form (%mpirun)."""
    if cell and (args.status or args.stop or args.stacks or args.where):
        raise MlpMagicError("%%mpirun: --status, --stop, --stacks and --where are line forms "
                            "(%mpirun --where)")
    if cell and args.script:
        raise MlpMagicError(f"%%mpirun: {args.script!r} looks like a script, which the line form runs "
                            "(%mpirun script.py args); the cell form takes options only")
    if not cell and args.post_mortem:
        raise MlpMagicError("%mpirun: --post-mortem runs a cell: %%mpirun --post-mortem, then the code")
