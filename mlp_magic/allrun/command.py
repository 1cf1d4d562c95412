"""The ``allrun`` console script: run a shell command once on every host of the job.

On a terminal, lines are printed live, prefixed by their host in colour (NO_COLOR honoured),
then the grouped summary follows. Bad input: one line on stderr, exit status 2, nothing run.
"""
from __future__ import annotations

import os
import signal
import sys

from mlp_magic.errors import MlpMagicError, unwritable_output
from mlp_magic.ssh.interrupts import InterruptsDeferred, notice_dropped_interrupts, terminate_as_interrupt

# Host prefix colours for live lines, cycled by host position (no red: it means failure).
_PALETTE = ("\x1b[36m", "\x1b[32m", "\x1b[33m", "\x1b[35m", "\x1b[34m", "\x1b[96m", "\x1b[92m", "\x1b[93m")
_RESET = "\x1b[0m"


def use_color(stream) -> bool:
    """Colour on a terminal unless NO_COLOR is set (https://no-color.org)."""
    from mlp_magic import config   # here: the start-up path imports no more than it needs

    return not config.no_color() and hasattr(stream, "isatty") and stream.isatty()


class StreamPrinter:
    """``host: line`` as lines arrive; stdout lines to stdout, stderr lines to stderr."""

    def __init__(self, host_names: list, color: bool):
        width = max((len(name) for name in host_names), default=0)
        self.prefix = {}
        for index, name in enumerate(host_names):
            tag = f"{name}:".ljust(width + 1)
            self.prefix[name] = f"{_PALETTE[index % len(_PALETTE)]}{tag}{_RESET} " if color else f"{tag} "

    def __call__(self, host: str, stream: str, line: str) -> None:
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.write(f"{self.prefix.get(host, host + ': ')}{line}\n")
        out.flush()


def main(argv: list | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    terminate_as_interrupt()   # stop the hosts' commands too
    # Until the run's own loop waits, a Ctrl-C is recorded, not raised (see InterruptsDeferred);
    # meanwhile the hosts' processes start, then asyncio is imported while they shake hands.
    with InterruptsDeferred() as deferred:
        from mlp_magic.allrun.plan import Plan
        from mlp_magic.commands.pure.parse import allrun_argv

        try:
            options = allrun_argv(argv)
            if options.help:
                sys.stdout.write(usage_text())
                return 0
            plan = Plan(options)
            early = plan.start_early()
        except MlpMagicError as error:
            return _bad_input(error)
        try:
            from mlp_magic.allrun import report  # noqa: F401  (the renderers, and below asyncio: held whole)
            from mlp_magic.ssh import runner  # noqa: F401
        except BaseException:
            if early is not None:
                early.stop_unclaimed()
            raise
    return _run(plan, options, early, deferred)


def _run(plan, options, early, deferred) -> int:
    from mlp_magic.allrun import report
    from mlp_magic.allrun.plan import run_plan

    live = None
    if not options.json and sys.stdout.isatty():
        live = StreamPrinter([t.name for t in plan.targets], use_color(sys.stdout))
    try:
        results = run_plan(plan, live, early, interrupted=deferred.asked)
    except MlpMagicError as error:
        return _bad_input(error)
    if options.json:
        sys.stdout.write(report.results_json(results) + "\n")
    else:
        if live is not None:
            sys.stdout.write("\n")
        sys.stdout.write(report.render_text(results, options, color=use_color(sys.stdout)))
        sys.stdout.flush()
        sys.stderr.write(report.footer(results) + "\n")
    sys.stdout.flush()
    return report.exit_status(results)


def usage_text() -> str:
    """``allrun --help``: the options from commands/table, and the exit statuses."""
    from mlp_magic.commands.pure.table import ALLRUN
    from mlp_magic.core.options import usage

    return (usage(ALLRUN.command, (*ALLRUN.options, *ALLRUN.command_options), "[--] COMMAND...")
            + f"\n{ALLRUN.summary[0].upper()}{ALLRUN.summary[1:]}.\n" + HOSTS_AND_EXITS)


HOSTS_AND_EXITS = """\
Hosts: --hostfile / -H, else the job's MLP_* (or Slurm, torchrun) variables, else this machine.
Exit status: 0 when every host succeeded, else the largest remote exit status; 255 when a host
was unreachable or timed out; 130 after Ctrl-C; 2 for bad input (nothing run).
"""


def _bad_input(error: MlpMagicError) -> int:
    """One line on stderr, exit status 2."""
    text = " ".join(str(error).split("\n"))
    sys.stderr.write(text if text.startswith("allrun") else f"allrun: {text}")
    sys.stderr.write("\n")
    return 2


def run() -> None:
    """The console script: ``main`` plus what only a process of its own may do. A Ctrl-C that
    CPython would drop is noticed; ssl stays out (allrun never opens TLS, yet asyncio loads
    libssl and libcrypto just in case: a fifth of its import, which every cold call pays)."""
    notice_dropped_interrupts()
    sys.modules.setdefault("ssl", None)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)   # an inherited SIG_IGN would lose exit statuses
    try:
        code = main()
    except KeyboardInterrupt:   # before anything started, or a second Ctrl-C: no traceback
        from mlp_magic.allrun.report import EXIT_INTERRUPTED

        sys.stderr.write("allrun: interrupted\n")
        code = EXIT_INTERRUPTED
    except OSError as error:
        code = _output_failed(error)
    else:
        failed = _output_failed()   # what was written may fail only now (a full disk)
        code = code or failed
    # All is written and every child waited for: skip the interpreter's teardown of some 200
    # modules (about 10 ms, a twentieth of a cold call to one host).
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


def _output_failed(error: OSError | None = None) -> int:
    """1, said in one line, when the output could not be written (a full disk); 0 when it was
    (or its reader left: ``allrun ... | head``). ``error``: one raised while writing it (any
    other goes on)."""
    why = unwritable_output(error)
    if why is None:
        if error is not None and not isinstance(error, BrokenPipeError):
            raise error
        return 0
    sys.stderr.write(f"allrun: cannot write: {why}\n")
    return 1


if __name__ == "__main__":
    run()
