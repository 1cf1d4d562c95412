"""The ``mlp-magic`` command (also ``python -m mlp_magic.cli``: other hosts are asked that way).

    mlp-magic topo     GPU/NIC link matrix of a host (like nvidia-smi topo -m)
    mlp-magic status   hosts, slots, ranks, reachability, GPUs
    mlp-magic stacks   every rank's Python stack, merged (also %mlp_stacks)
    mlp-magic top      the Worlds' ranks and the GPUs, live
    mlp-magic doctor   every host checked and compared, the odd one named (also %mlp_doctor)
    mlp-magic worlds   the Worlds on this machine (kernel alive or gone, kept or not)
    mlp-magic stop ID  stop one of them
    mlp-magic dashboard  the live view as a web page, served alone (no Jupyter server needed)

The verbs and their options are commands/pure/table's, parsed as the magics' are; each runs its
``run_command``. Bad input exits with status 2 and one line on stderr; a host that ``topo --host``
cannot probe, or stacks that cannot be read at all (py-spy missing, ptrace refused), with status 1.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

from mlp_magic.commands.pure.parse import one_id
from mlp_magic.commands.pure.table import COMMANDS, command_verb
from mlp_magic.core.options import Options, argv_words, parse, usage
from mlp_magic.errors import MlpMagicError, StacksFault, unwritable_output

PROG = "mlp-magic"


def overview() -> str:
    width = max(len(verb.command) for verb in COMMANDS)
    lines = [f"usage: {PROG} {{{','.join(verb.command for verb in COMMANDS)}}} [options]",
             "", "See the cluster: hosts, ranks, GPU topology and stacks.", ""]
    lines += [f"  {verb.command:<{width}}  {verb.summary}" for verb in COMMANDS]
    return "\n".join(lines) + f"\n\n{PROG} COMMAND --help: the command's options\n"


def parse_command(argv: Sequence[str]) -> tuple:
    """(the verb, its Options), or (None, None) when the overview was asked for."""
    if not argv:
        raise MlpMagicError(f"give a command: {', '.join(verb.command for verb in COMMANDS)} "
                            f"(see {PROG} --help)")
    if argv[0] in ("-h", "--help"):
        return None, None
    verb = command_verb(argv[0])
    if verb is None:
        raise MlpMagicError(f"unknown command {argv[0]!r}: one of "
                            f"{', '.join(v.command for v in COMMANDS)} (see {PROG} --help)")
    prog = f"{PROG} {verb.command}"
    options = (*verb.options, *verb.command_options)
    try:
        parsed = parse(argv_words(argv[1:]), options, prog)
    except MlpMagicError as err:
        raise MlpMagicError(f"{err} (see {prog} --help)") from None
    words = list(argv[1:][parsed.rest:]) if parsed.rest is not None else []
    if words and verb.rest != "id":
        raise MlpMagicError(f"{prog}: unexpected argument {words[0]!r} (see {prog} --help)")
    found = Options(options, parsed.values, parsed.given)
    found.world_id = one_id(words, prog, verb.label) if verb.rest == "id" else None
    return verb, found


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        verb, options = parse_command(argv)
        if verb is None or options.help:
            sys.stdout.write(overview() if verb is None else
                             usage(f"{PROG} {verb.command}", (*verb.options, *verb.command_options)))
            return 0
        from mlp_magic.commands.context import handler

        return handler(verb.run_command)(options)
    except StacksFault as exc:
        print("%s: %s" % (PROG, exc), file=sys.stderr)
        return 1
    except MlpMagicError as exc:
        message = str(exc)
        print(message if message.startswith(PROG) else f"{PROG}: {message}", file=sys.stderr)
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
    its own, where ssl can stay out, as in allrun's: no subcommand but top opens TLS, yet asyncio (the
    ssh transport) loads libssl and libcrypto just in case, a fifth of a stacks call's own CPU.
    SIGTERM stops the command as a Ctrl-C does: its hosts' processes are stopped first."""
    from mlp_magic.ssh.interrupts import terminate_as_interrupt

    if sys.argv[1:2] not in (["top"], ["dashboard"]):   # top follows the agents, which serve TLS
        sys.modules.setdefault("ssl", None)         # across hosts; dashboard's web server needs ssl
    terminate_as_interrupt()
    code = main()
    if _said_unwritable():   # what was written may fail only now (a full disk)
        code = code or 1
    sys.exit(code)


def _said_unwritable(error: OSError | None = None) -> bool:
    """Whether the output could not be written (``error``: one just raised), said in one line."""
    why = unwritable_output(error)
    if why is not None:
        print("%s: cannot write: %s" % (PROG, why), file=sys.stderr)
    return why is not None


if __name__ == "__main__":
    run()
