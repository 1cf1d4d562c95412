"""The ``allrun`` console script: run a shell command once on every host of the job.

On a terminal, lines are printed live, prefixed by their host in colour (NO_COLOR honoured),
then the grouped summary follows. Bad input: one line on stderr, exit status 2, nothing run.
"""
from __future__ import annotations

import os
import signal
import sys

from .errors import MlpMagicError

# Host prefix colours for live lines, cycled by host position (no red: it means failure).
_PALETTE = ("\x1b[36m", "\x1b[32m", "\x1b[33m", "\x1b[35m", "\x1b[34m", "\x1b[96m", "\x1b[92m", "\x1b[93m")
_RESET = "\x1b[0m"


def use_color(stream) -> bool:
    """Colour on a terminal unless NO_COLOR is set (https://no-color.org)."""
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


class LivePrinter:
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


def _terminate_as_interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list | None = None) -> int:
    from . import allrun

    argv = sys.argv[1:] if argv is None else argv
    try:
        options = allrun.parse_allrun_argv(argv)
        if options.help:
            sys.stdout.write(allrun.USAGE)
            return 0
        plan = allrun.Plan(options)
    except MlpMagicError as error:
        return _bad_input(error)
    if threading_main():
        signal.signal(signal.SIGTERM, _terminate_as_interrupt)  # stop the hosts' commands too
    live = None
    if not options.json and sys.stdout.isatty():
        live = LivePrinter([t.name for t in plan.targets], use_color(sys.stdout))
    try:
        # The hosts' processes start before asyncio is imported: the handshakes overlap it.
        results = allrun.run_plan(plan, live, start_early=True)
    except MlpMagicError as error:
        return _bad_input(error)
    if options.json:
        sys.stdout.write(allrun.results_json(results) + "\n")
    else:
        if live is not None:
            sys.stdout.write("\n")
        sys.stdout.write(allrun.render_text(results, options, color=use_color(sys.stdout)))
        sys.stdout.flush()
        sys.stderr.write(allrun.footer(results) + "\n")
    sys.stdout.flush()
    return allrun.exit_status(results)


def allrun_exit_interrupted() -> int:
    from .allrun import EXIT_INTERRUPTED

    return EXIT_INTERRUPTED


def _bad_input(error: MlpMagicError) -> int:
    """One line on stderr, exit status 2."""
    text = " ".join(str(error).split("\n"))
    sys.stderr.write(text if text.startswith("allrun") else f"allrun: {text}")
    sys.stderr.write("\n")
    return 2


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def run() -> None:
    """The console script. allrun never opens TLS, yet asyncio imports ssl (loading libssl and
    libcrypto) just in case: leaving it out of this process takes a fifth off asyncio's import,
    which every cold call pays."""
    sys.modules.setdefault("ssl", None)
    try:
        code = main()
    except KeyboardInterrupt:   # before anything started, or a second Ctrl-C: no traceback
        sys.stderr.write("allrun: interrupted\n")
        code = allrun_exit_interrupted()
    # All is written and every child waited for: skip the interpreter's teardown of some 200
    # modules (about 10 ms, a twentieth of a cold call to one host).
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass   # the reader went away (`allrun ... | head`): nothing more to say
    os._exit(code)


if __name__ == "__main__":
    run()
