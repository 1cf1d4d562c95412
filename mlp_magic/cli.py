"""The ``mlp-magic`` command (also ``python -m mlp_magic.cli``: other hosts are asked that way).

    mlp-magic topo [--host H] [--from-file FILE] [--json]   GPU/NIC link matrix of a host
    mlp-magic status [--hostfile F | -H HOSTS] [--json]    hosts, slots, ranks, reachability, GPUs
    mlp-magic stacks [--hostfile F | -H HOSTS] [--pid P | --match RE] [--native] ...
                                                           every rank's Python stack, merged
    mlp-magic top [--hostfile F | -H HOSTS] [--once]       the Worlds' ranks and the GPUs, live
    mlp-magic doctor [--hostfile F | -H HOSTS] [--package NAME] [--links] [--json]
                                                           every host checked and compared, the odd one named

Each subcommand lives with its feature (``cluster.cli``, ``stacks.command``); this module parses
and dispatches. Bad input exits with status 2 and one line on stderr; a host that ``topo --host``
cannot probe, or stacks that cannot be read at all (py-spy missing, ptrace refused), with status 1.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from mlp_magic.core.line_args import LineParser
from mlp_magic.errors import MlpMagicError, unwritable_output
from mlp_magic.stacks import StacksFault

PROG = "mlp-magic"
COMMANDS = ("topo", "status", "stacks", "top", "doctor")


class _Parser(LineParser):
    """Bad usage in one line (exit 2) instead of usage + error; ``--help`` prints and exits."""

    exit = argparse.ArgumentParser.exit

    def one_line(self, message: str) -> str:
        return "%s (see %s --help)" % (message, self.prog)


def _parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The command's parser; ``only="stacks"`` leaves the cluster's subcommands (and their imports:
    the GPU probes, the cluster model) out, so that stacks starts its hosts' ssh sooner."""
    parser = _Parser(prog=PROG, description="See the cluster: hosts, ranks, GPU topology and stacks.")
    commands = parser.add_subparsers(dest="command", metavar="{%s}" % ",".join(COMMANDS),
                                     parser_class=_Parser)
    commands.required = True
    if only != "stacks":
        from mlp_magic.cluster.cli import add_status_arguments, add_topo_arguments

        add_topo_arguments(commands.add_parser("topo", help="GPU/NIC link matrix (like nvidia-smi topo -m)"))
        add_status_arguments(commands.add_parser("status", help="hosts, slots, ranks, reachability and GPUs"))
        from mlp_magic.cluster.top import add_top_arguments

        add_top_arguments(commands.add_parser("top", help="the Worlds' ranks and every host's GPUs, live"))
        from mlp_magic.doctor.options import add_doctor_arguments

        add_doctor_arguments(commands.add_parser(
            "doctor", help="check every host of the job at once and name the odd one out"))
    from mlp_magic.stacks.options import add_stacks_arguments

    add_stacks_arguments(commands.add_parser(
        "stacks", help="every rank's Python stack (py-spy), all hosts at once, merged into one tree"))
    return parser


def _run(args: argparse.Namespace) -> int:
    if args.command == "stacks":
        from mlp_magic.stacks.command import run_command
        from mlp_magic.stacks.options import options_from

        return run_command(options_from(args))
    if args.command == "top":
        from mlp_magic.cluster.top import run_top

        return run_top(args)
    if args.command == "doctor":
        from mlp_magic.doctor.command import run_command as run_doctor
        from mlp_magic.doctor.options import options_from as doctor_options

        return run_doctor(doctor_options(args))
    from mlp_magic.cluster.cli import run_status, run_topo

    return run_topo(args) if args.command == "topo" else run_status(args)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return _run(_parser(argv[0] if argv[:1] == ["stacks"] else None).parse_args(argv))
    except StacksFault as exc:
        print("%s: %s" % (PROG, exc), file=sys.stderr)
        return 1
    except MlpMagicError as exc:
        print("%s: %s" % (PROG, exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:   # Ctrl-C or SIGTERM (``run``): the hosts' commands were stopped
        print("%s: interrupted" % PROG, file=sys.stderr)
        return 130
    except BrokenPipeError:  # `mlp-magic topo --json | head`: the reader left, nothing to say
        sys.stderr.close()
        return 0
    except OSError as exc:
        if not _said_unwritable(exc):
            raise
        return 1
    except Exception as exc:
        if not _host_probe_failed(exc):
            raise
        print("%s: %s" % (PROG, exc), file=sys.stderr)
        return 1


def _host_probe_failed(exc: Exception) -> bool:
    """``topo --host H`` could not probe H (the cluster's module is only loaded for topo/status)."""
    cluster_cli = sys.modules.get("mlp_magic.cluster.cli")
    return cluster_cli is not None and isinstance(exc, cluster_cli.HostProbeFailed)


def run() -> None:
    """The console script (``mlp-magic``, ``python -m mlp_magic.cli``): ``main`` in a process of
    its own, where ssl can stay out, as in allrun's: no subcommand opens TLS, yet asyncio (the
    ssh transport) loads libssl and libcrypto just in case, a fifth of a stacks call's own CPU.
    SIGTERM stops the command as a Ctrl-C does: its hosts' processes are stopped first."""
    from mlp_magic.ssh.interrupts import terminate_as_interrupt

    sys.modules.setdefault("ssl", None)
    terminate_as_interrupt()
    code = main()
    if _said_unwritable():   # what was written may fail only now (a full disk)
        code = code or 1
    sys.exit(code)


def _said_unwritable(error: Optional[OSError] = None) -> bool:
    """Whether the output could not be written (``error``: one just raised), said in one line."""
    why = unwritable_output(error)
    if why is not None:
        print("%s: cannot write: %s" % (PROG, why), file=sys.stderr)
    return why is not None


if __name__ == "__main__":
    run()
