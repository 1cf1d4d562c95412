"""The options of ``mlp-magic doctor`` and ``%mlp_doctor``: one parser for both (pure).

    [--hostfile FILE | -H HOSTS] [--package NAME ...] [--timeout S] [--ssh CMD] [--python PATH]
    [--no-import] [--links [--np N] [--fraction F] [--size MB] [--links-backend B]] [--json]

Bad input is one MlpMagicError naming the option and the value.
"""
from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Mapping

from mlp_magic.core.line_args import LineParser, parse_magic_line
from mlp_magic.core.records import Record

USAGE = ("[--hostfile FILE | -H HOSTS] [--package NAME ...] [--timeout S] [--ssh CMD] [--python PATH] "
         "[--no-import] [--links [--np N] [--fraction F] [--size MB] [--links-backend B]] [--json]")
_PACKAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MAX_TIMEOUT = 3600.0


class DoctorOptions(Record):
    hostfile: str | None = None
    hosts: str | None = None        # -H
    packages: tuple = ()            # --package, more packages to compare
    timeout: float = 10.0           # one deadline for every host's probe
    ssh: str | None = None
    python: str | None = None       # the interpreter each host runs the probe with (default: this one's path)
    no_import: bool = False         # versions from the metadata only: nothing is imported
    links: bool = False             # the collective test too
    np: int | None = None           # ranks of the link test (default: every slot, as %%mpirun)
    fraction: float = 0.5           # a host or pair below this share of the median is named
    size_mb: float = 16.0           # the all_reduce's message size
    links_backend: str = "auto"     # torch (nccl/gloo), mpi (mpi4py), auto: torch where it imports
    json: bool = False


def _package(text: str) -> str:
    if not _PACKAGE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a package name: {text!r}")
    return text


def _bounded(low: float, high: float, what: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not low < value <= high:
            raise argparse.ArgumentTypeError(f"expected {what} in ({low:g}, {high:g}], got {text!r}")
        return value
    return parse


def _ranks(text: str) -> int:
    if not text.isdigit() or not 2 <= int(text) <= 4096:
        raise argparse.ArgumentTypeError(f"expected a number of ranks from 2 to 4096, got {text!r}")
    return int(text)


def add_doctor_arguments(parser: argparse.ArgumentParser) -> None:
    hosts = parser.add_mutually_exclusive_group()
    hosts.add_argument("--hostfile", help="an MPI hostfile (else the environment's hosts, else this machine)")
    hosts.add_argument("-H", "--hosts", help="host list such as worker[0-3]")
    parser.add_argument("--package", dest="packages", action="append", type=_package, default=[],
                        metavar="NAME", help="another package to compare (repeat for more)")
    parser.add_argument("--timeout", type=_bounded(0, MAX_TIMEOUT, "seconds"), default=DoctorOptions.timeout,
                        help="seconds for every host to answer, one deadline (10)")
    parser.add_argument("--ssh", help="ssh client for other hosts (default $MLP_MAGIC_SSH or ssh)")
    parser.add_argument("--python",
                        help="the Python each host runs the probe with (default: this one's path)")
    parser.add_argument("--no-import", action="store_true",
                        help="read versions from the packages' metadata only (import nothing: faster)")
    parser.add_argument("--links", action="store_true",
                        help="also run all_reduce (nccl on GPUs, else gloo, or MPI) and host-pair send/recv")
    parser.add_argument("--np", type=_ranks, help="ranks of the link test (default: every slot)")
    parser.add_argument("--fraction", type=_bounded(0, 1, "a fraction"), default=DoctorOptions.fraction,
                        help="name hosts and pairs below this share of the median bandwidth (0.5)")
    parser.add_argument("--size", dest="size_mb", type=_bounded(0, 4096, "megabytes"),
                        default=DoctorOptions.size_mb, help="all_reduce message size in MB (16)")
    parser.add_argument("--links-backend", choices=("auto", "torch", "mpi"),
                        default=DoctorOptions.links_backend,
                        help="torch.distributed (nccl on GPUs, else gloo), the job's MPI through mpi4py, "
                             "or auto: torch where it imports, else MPI (auto)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")


def options_from(namespace: argparse.Namespace) -> DoctorOptions:
    values = {name: value for name, value in vars(namespace).items() if name in DoctorOptions._fields}
    values["packages"] = tuple(dict.fromkeys(values.get("packages") or ()))
    return DoctorOptions(**values)


@functools.lru_cache(maxsize=None)
def _magic_parser() -> LineParser:
    parser = LineParser(prog="%mlp_doctor", add_help=False, allow_abbrev=False)
    add_doctor_arguments(parser)
    return parser


def parse_doctor_line(line: str, env: Mapping, user_ns: Mapping | None = None) -> DoctorOptions:
    """``%mlp_doctor``'s line ($NAMES expanded as in every magic) -> DoctorOptions."""
    return options_from(parse_magic_line(_magic_parser(), USAGE, line, env, user_ns))
