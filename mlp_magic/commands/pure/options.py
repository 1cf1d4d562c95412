"""Every option of every verb, each defined once: its spellings, its field, its kind, its help.

The verbs (commands/table) list which of these they take. Kinds are core/options'; the few that
only one verb needs (process ids, a regular expression, HOST=FILE) are here.
"""
from __future__ import annotations

import re

from mlp_magic.core.options import (OFF, BadValue, Option, choice, matching, number_in, positive_int,
                                    python_name, python_names, rank_number, seconds, text, whole_number)

MAX_PIDS = 4096
STACKS_MAX_TIMEOUT = 86400.0   # a day: beyond it, poll's and the thread waits' limits would be hit
DOCTOR_MAX_TIMEOUT = 3600.0
PROFILE_MAX_RATE = 1000   # py-spy reads the rank 1000 times a second: beyond, its own cost shows
_PID = r"[0-9]{1,10}"


def process_ids(value: str) -> list:
    pieces = [p.strip() for p in value.split(",")]
    bad = next((p for p in pieces if not re.fullmatch(_PID, p) or int(p) == 0), None)
    if bad is not None:
        raise BadValue(f"expected process ids such as 1234,1240, got {value!r} ({bad!r} is not one)")
    if len(pieces) > MAX_PIDS:
        raise BadValue(f"at most {MAX_PIDS} process ids, got {len(pieces)}")
    return sorted({int(p) for p in pieces})


def regular_expression(value: str) -> str:
    if not value:
        raise BadValue("an empty pattern matches every Python process; give one")
    try:
        re.compile(value)
    except (re.error, RecursionError, OverflowError) as err:
        raise BadValue(f"not a regular expression: {value!r} ({err})") from None
    return value


def link_ranks(value: str) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 4) or not 2 <= int(value) <= 4096:
        raise BadValue(f"expected a number of ranks from 2 to 4096, got {value!r}")
    return int(value)


def host_and_file(value: str) -> tuple:
    """``HOST=FILE``: a host's saved ``nvidia-smi topo -m``."""
    host, sep, path = value.partition("=")
    if not sep or not host.strip() or not path.strip():
        raise BadValue(f"expected HOST=FILE (a saved `nvidia-smi topo -m`), got {value!r}")
    return host.strip(), path.strip()


# ---------------------------------------------------------------------------- hosts
HOSTFILE = Option(names=("--hostfile", "--machinefile"), dest="hostfile", kind=text, group="hosts",
                  metavar="FILE", help="an MPI hostfile (else the job's variables, else this machine)")
HOST_LIST = Option(names=("-H", "--host", "--hosts"), dest="hosts", kind=text, group="hosts",
                   metavar="HOSTS", help="host list such as worker[0-3]:8")
SSH = Option(names=("--ssh",), dest="ssh", kind=text, metavar="CMD",
             help="the ssh client for other hosts (default $MLP_MAGIC_SSH or ssh)")
JSON = Option(names=("--json",), dest="json", help="print JSON")

# ---------------------------------------------------------------------------- %%mpirun
NP = Option(names=("-np", "-n"), dest="np", kind=positive_int(), metavar="N", help="ranks")
OVERSUBSCRIBE = Option(names=("--oversubscribe",), dest="oversubscribe", help="more ranks than slots")
RANKS = Option(names=("--ranks", "--targets"), dest="ranks", kind=text, metavar="SPEC",
               help="only these ranks, such as 0,2-3")
TIMEOUT = Option(names=("--timeout",), dest="timeout", kind=seconds(), metavar="S",
                 help="interrupt the ranks still running after S seconds")
NO_GROUP = Option(names=("--no-group",), dest="group", kind=OFF, default=True,
                  help="one block per rank (or host) instead of grouping identical outputs")
DIFF = Option(names=("--diff",), dest="diff", help="show groups that differ from the largest as a diff")
NO_FOLD = Option(names=("--no-fold",), dest="fold", kind=OFF, default=True,
                 help="do not fold outputs that differ only in their numbers")
ALL_OUTPUTS = Option(names=("--all-outputs",), dest="all_outputs",
                     help="show rich outputs (display, plots, last value) of every rank, not only rank 0")
OUT = Option(names=("-o", "--out"), dest="out", kind=python_name, metavar="NAME",
             help="keep the result in the notebook's NAME")
LOG_DIR = Option(names=("--log-dir",), dest="log_dir", kind=text, metavar="DIR",
                 help="the cell's logs under DIR")
RESTART = Option(names=("--restart",), dest="restart", help="start the World again first")
KEEP = Option(names=("--keep",), dest="keep", help="the World outlives this kernel (see --attach)")
FORCE = Option(names=("--force",), dest="force", help="take the World over from the kernel that drives it")
IF = Option(names=("--if",), dest="condition", kind=text, metavar="EXPR",
            help="stop only where EXPR is true, evaluated in the rank's frame")
COPY_NAMES = Option(names=("--copy",), dest="names", kind=python_names, metavar="NAMES",
                    help="copy these variables (model,opt) from a live rank to the new ranks")
FROM_RANK = Option(names=("--from",), dest="source", kind=rank_number, metavar="RANK",
                   help="the live rank --copy copies from (default: the lowest live rank)")
RATE = Option(names=("--rate",), dest="rate", kind=positive_int(PROFILE_MAX_RATE), metavar="HZ",
              help="samples a second on each rank (default: 100, lower where ranks share a host's cores)")
FRAME = Option(names=("--frame",), dest="frame", kind=whole_number, metavar="K",
               help="the frame K of the failure (0: the innermost of user code)")

# ---------------------------------------------------------------------------- allrun
EXCLUDE = Option(names=("-x", "--exclude"), dest="exclude", kind=text, metavar="HOSTS",
                 help="leave these hosts out (node sets like worker[2-3] work)")
FANOUT = Option(names=("-f", "--fanout"), dest="fanout", kind=positive_int(), default=64, metavar="N",
                help="at most N hosts at a time (default 64)")
CONNECT_TIMEOUT = Option(names=("--connect-timeout",), dest="connect_timeout", kind=seconds(), default=10.0,
                         metavar="S", help="give up on a host that does not answer in S s (default 10)")
HOST_TIMEOUT = Option(names=("-t", "--timeout"), dest="timeout", kind=seconds(), metavar="S",
                      help="kill the command (its whole process group) after S s on a host")
OUTDIR = Option(names=("--outdir",), dest="outdir", kind=text, metavar="DIR",
                help="write DIR/<host>.stdout and DIR/<host>.stderr")
COPY = Option(names=("--copy",), dest="copy", kind=text, second=True, metavar="SRC [DEST]",
              help="first put the file SRC at DEST (default: the same path) on every host")
HELP = Option(names=("-h", "--help"), dest="help", help="show this help")

# ---------------------------------------------------------------------------- %mlp_cluster
REFRESH = Option(names=("--refresh",), dest="auto_refresh", kind=seconds(), metavar="S",
                 help="topology, reachability and GPUs collected again every S seconds (5; ranks: 1 s)")
STATIC = Option(names=("--static",), dest="static",
                help="draw once: no kernel thread updates the widget while other cells run")
PROBE_TIMEOUT = Option(names=("--timeout",), dest="timeout", kind=seconds(), default=5.0, metavar="S",
                       help="GPU probe timeout in seconds (5)")
NO_PROBE = Option(names=("--no-probe",), dest="probe", kind=OFF, default=True, help="do not probe GPUs")
TOPO_FILE = Option(names=("--topo-file",), dest="gpus", kind=host_and_file, repeat=True, metavar="HOST=FILE",
                   help="HOST's saved `nvidia-smi topo -m` (repeat for more hosts)")

# ---------------------------------------------------------------------------- stacks
PIDS = Option(names=("--pid",), dest="pids", kind=process_ids, group="which", metavar="PID[,PID...]",
              help="these processes (on every host asked), not the ranks")
MATCH = Option(names=("--match",), dest="match", kind=regular_expression, group="which", metavar="REGEX",
               help="Python processes whose command line matches, not the ranks")
NATIVE = Option(names=("--native",), dest="native", help="C/C++ frames too (py-spy --native)")
THREADS = Option(names=("--threads",), dest="threads", help="show idle threads too")
STACKS_TIMEOUT = Option(names=("--timeout",), dest="timeout", kind=seconds(STACKS_MAX_TIMEOUT), default=10.0,
                        metavar="S", help="seconds for every host to answer, one deadline (10)")

# ---------------------------------------------------------------------------- doctor
PACKAGE_NAME = matching(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", "a package name")
PACKAGE = Option(names=("--package",), dest="packages", kind=PACKAGE_NAME, repeat=True, default=(),
                 metavar="NAME", help="another package to compare (repeat for more)")
DOCTOR_TIMEOUT = Option(names=("--timeout",), dest="timeout",
                        kind=number_in(0, DOCTOR_MAX_TIMEOUT, "seconds"), default=10.0, metavar="S",
                        help="seconds for every host to answer, one deadline (10)")
PYTHON = Option(names=("--python",), dest="python", kind=text, metavar="PATH",
                help="the Python each host runs the probe with (default: this one's path)")
NO_IMPORT = Option(names=("--no-import",), dest="no_import",
                   help="read versions from the packages' metadata only (import nothing: faster)")
LINKS = Option(names=("--links",), dest="links",
               help="also run all_reduce (nccl on GPUs, else gloo, or MPI) and host-pair send/recv")
LINK_RANKS = Option(names=("--np",), dest="np", kind=link_ranks, metavar="N",
                    help="ranks of the link test (default: every slot)")
FRACTION = Option(names=("--fraction",), dest="fraction", kind=number_in(0, 1, "a fraction"), default=0.5,
                  metavar="F", help="name hosts and pairs below this share of the median bandwidth (0.5)")
SIZE = Option(names=("--size",), dest="size_mb", kind=number_in(0, 4096, "megabytes"), default=16.0,
              metavar="MB", help="all_reduce message size in MB (16)")
LINKS_BACKEND = Option(names=("--links-backend",), dest="links_backend", kind=choice("auto", "torch", "mpi"),
                       default="auto", metavar="B", help="torch, mpi, or auto: torch where it imports (auto)")

# ---------------------------------------------------------------------------- topo, status, top
TOPO_HOST = Option(names=("--host",), dest="host", kind=text, metavar="H", help="host to show (this machine)")
FROM_FILE = Option(names=("--from-file",), dest="from_file", kind=text, metavar="FILE",
                   help="read a saved `nvidia-smi topo -m` text ('-': stdin)")
STATUS_TIMEOUT = Option(names=("--timeout",), dest="timeout", kind=seconds(), default=2.0, metavar="S",
                        help="probe timeout in seconds, one deadline for all hosts (2)")
ONCE = Option(names=("--once",), dest="once", help="print one frame and exit")
INTERVAL = Option(names=("--interval",), dest="interval", kind=seconds(), default=1.0, metavar="S",
                  help="seconds between frames when nothing changes (1)")

# ---------------------------------------------------------------------------- mlp-magic dashboard
PORT = Option(names=("--port",), dest="port", kind=positive_int(65535), metavar="P",
              help="the port to listen on (default: a free one)")
LISTEN_HOST = Option(names=("--host",), dest="bind", kind=text, default="127.0.0.1", metavar="ADDRESS",
                     help="the address to listen on (127.0.0.1; others reach 0.0.0.0, with the token)")
