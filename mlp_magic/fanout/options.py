"""``allrun``: one shell command once on every host, for the ``allrun`` command and ``%allrun``.

The path is short and one-directional:
  options (parsed here, pure) -> hosts (Topology, minus --exclude) -> ssh transport (or the local
  machine, or a caller-given transport) -> HostResults -> grouping -> text / HTML / JSON.

Running is blocking and interruptible: the asyncio transport runs in a worker thread while the
calling thread prints live lines and waits, so Ctrl-C (KeyboardInterrupt in the calling thread,
whether a terminal or a Jupyter kernel) stops the unfinished hosts, keeps what they printed,
and still returns every result.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping  # not typing: its import slows the allrun CLI's start

from .errors import MlpMagicError
from .records import Record, fresh
from .results import FAILED, INTERRUPTED, OK, TIMEOUT, UNREACHABLE, HostResult

DEFAULT_FANOUT = 64
DEFAULT_CONNECT_TIMEOUT = 10.0
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_UNREACHABLE = 255
LIVE_BACKLOG = 20000   # live lines waiting for the display; more are not shown live


class AllrunOptions(Record):
    command: str = ""                 # the shell command (or the %%allrun cell) as one string
    hostfile: str | None = None
    hosts: str | None = None          # -H
    exclude: str | None = None        # -x, a host list or node set
    fanout: int = DEFAULT_FANOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    timeout: float | None = None      # per host, from the start of its ssh
    ssh: str | None = None            # the ssh client command; default $MLP_MAGIC_SSH, else "ssh"
    group: bool = True
    diff: bool = False
    json: bool = False
    outdir: str | None = None
    copy: tuple | None = None         # (src, dest or None)
    out: str | None = None            # %allrun -o NAME
    help: bool = False


# ------------------------------------------------------------------------- parsing (pure)

# option -> (field, kind); kind: "flag", "text", "int", "seconds", "name", "copy", "help"
_OPTIONS = {
    "--hostfile": ("hostfile", "text"), "--machinefile": ("hostfile", "text"),
    "-H": ("hosts", "text"), "--host": ("hosts", "text"), "--hosts": ("hosts", "text"),
    "-x": ("exclude", "text"), "--exclude": ("exclude", "text"),
    "-f": ("fanout", "int"), "--fanout": ("fanout", "int"),
    "--connect-timeout": ("connect_timeout", "seconds"),
    "-t": ("timeout", "seconds"), "--timeout": ("timeout", "seconds"),
    "--ssh": ("ssh", "text"),
    "--no-group": ("group", "flag"),
    "--diff": ("diff", "flag"),
    "--json": ("json", "flag"),
    "--outdir": ("outdir", "text"),
    "--copy": ("copy", "copy"),
    "-o": ("out", "name"), "--out": ("out", "name"),
    "-h": ("help", "help"), "--help": ("help", "help"),
}
COMMAND_ONLY = {"--json", "-h", "--help"}   # meaningless in a notebook
MAGIC_ONLY = {"-o", "--out"}                # names a notebook variable

USAGE = """\
usage: allrun [--hostfile F | -H HOSTS] [-x HOSTS] [-f N] [--connect-timeout S] [-t S]
              [--ssh CMD] [--no-group] [--diff] [--json] [--outdir DIR] [--copy SRC [DEST]]
              [--] COMMAND...

Run a shell command once on every host of the job and show identical outputs once.
Hosts: --hostfile / -H, else the job's MLP_* (or Slurm, torchrun) variables, else this machine.
  -x, --exclude HOSTS     leave these hosts out (node sets like worker[2-3] work)
  -f, --fanout N          at most N hosts at a time (default 64)
  --connect-timeout S     give up on a host that does not answer in S s (default 10)
  -t, --timeout S         kill the command (its whole process group) after S s on a host
  --ssh CMD               the ssh client (default $MLP_MAGIC_SSH or ssh), e.g. "ssh -F cfg"
  --no-group              one block per host instead of grouping identical outputs
  --diff                  show groups that differ from the largest one as a diff
  --json                  print one JSON list of {host, status, exit_code, stdout, stderr, seconds}
  --outdir DIR            write DIR/<host>.stdout and DIR/<host>.stderr
  --copy SRC [DEST]       first put the file SRC at DEST (default: the same path) on every host
Exit status: 0 when every host succeeded, else the largest remote exit status; 255 when a host
was unreachable or timed out; 130 after Ctrl-C; 2 for bad input (nothing run).
"""


def split_with_offsets(line: str) -> Iterator[tuple[str, int]]:
    """Shell-like words of ``line`` with the offset where each starts, one at a time (so a
    command after the options is never tokenized: it is passed on exactly as written)."""
    index, length = 0, len(line)
    while True:
        while index < length and line[index].isspace():
            index += 1
        if index >= length:
            return
        start, word = index, []
        while index < length and not line[index].isspace():
            char = line[index]
            if char == "'":
                end = line.find("'", index + 1)
                if end < 0:
                    raise MlpMagicError(f"unclosed ' in {line.strip()!r}")
                word.append(line[index + 1:end])
                index = end + 1
            elif char == '"':
                index = _double_quoted(line, index + 1, word)
            elif char == "\\" and index + 1 < length:
                word.append(line[index + 1])
                index += 2
            else:
                word.append(char)
                index += 1
        yield "".join(word), start


def _double_quoted(line: str, index: int, word: list) -> int:
    while index < len(line):
        char = line[index]
        if char == '"':
            return index + 1
        if char == "\\" and index + 1 < len(line) and line[index + 1] in '"\\$`':
            word.append(line[index + 1])
            index += 2
        else:
            word.append(char)
            index += 1
    raise MlpMagicError(f'unclosed " in {line.strip()!r}')


def parse_allrun_argv(argv: list[str]) -> AllrunOptions:
    """The ``allrun`` command's arguments; the command words are joined with spaces (as ssh does)
    and run by the remote shell."""
    words = [(word, index) for index, word in enumerate(argv)]
    options, start = _parse_options(words, "allrun", COMMAND_ONLY)
    options.command = " ".join(argv[start:]) if start is not None else ""
    return _checked(options, "allrun")


def parse_allrun_line(line: str, cell: str | None, env: Mapping | None = None,
                      user_ns: Mapping | None = None) -> AllrunOptions:
    """``%allrun [options] COMMAND`` (the command kept exactly as written) or ``%%allrun [options]``
    with the cell as the script. ``$NAME`` in option values comes from the environment, then the
    notebook; the command's ``$NAME`` is left to the remote shell."""
    prog = "%%allrun" if cell is not None else "%allrun"
    env = os.environ if env is None else env
    options, start = _parse_options(split_with_offsets(line), prog, MAGIC_ONLY,
                                    expand=lambda text: _expand(text, env, user_ns))
    rest = line[start:].strip() if start is not None else ""
    if cell is not None:
        if rest:
            raise MlpMagicError(f"%%allrun: the first line takes options only, the cell is the script "
                                f"(found {rest!r})")
        options.command = cell
    else:
        options.command = rest
    return _checked(options, prog)


def _expand(text: str, env: Mapping, user_ns: Mapping | None) -> str:
    from .magic_args import expand_vars

    return expand_vars(text, env, user_ns)


class _Words:
    """An iterator of (word, position) that can give one word back."""

    def __init__(self, words):
        self._words, self._back = iter(words), []

    def next(self):
        return self._back.pop() if self._back else next(self._words, None)

    def push(self, item) -> None:
        self._back.append(item)


def _parse_options(words, prog: str, allowed_extra: set, expand=None):
    """Options up to the first word that is not one (or after ``--``). Returns the options and
    the position (argv index or line offset) where the command starts, or None."""
    options, copy_seen, words = AllrunOptions(), False, _Words(words)
    while True:
        item = words.next()
        if item is None:
            return options, None
        word, position = item
        if word == "--":
            following = words.next()
            return options, (following[1] if following else None)
        if not word.startswith("-") or word == "-":
            if copy_seen:
                raise MlpMagicError(f"{prog}: after --copy SRC [DEST], put -- before the command ({word!r})")
            return options, position
        name, value = _split_option(word)
        if name not in _OPTIONS or (name in (COMMAND_ONLY | MAGIC_ONLY) and name not in allowed_extra):
            raise MlpMagicError(
                f"{prog}: unknown option {word!r} (put -- before a command that starts with -)")
        dest, kind = _OPTIONS[name]
        if kind in ("flag", "help"):
            if value is not None:
                raise MlpMagicError(f"{prog}: {name} takes no value (got {word!r})")
            setattr(options, dest, name != "--no-group")
            continue
        if value is None:
            following = words.next()
            if following is None:
                raise MlpMagicError(f"{prog}: {name} needs a value")
            value = following[0]
        if kind == "copy":
            options.copy = _copy_args(value, words, expand)
            copy_seen = True
            continue
        if expand is not None:
            value = expand(value)
        setattr(options, dest, _convert(value, kind, name, prog))


def _split_option(word: str) -> tuple[str, str | None]:
    """``--fanout=8`` -> ("--fanout", "8"); ``-f8`` -> ("-f", "8"); ``-f`` -> ("-f", None)."""
    if word.startswith("--"):
        name, sep, value = word.partition("=")
        return name, (value if sep else None)
    if len(word) > 2 and word[:2] in _OPTIONS and _OPTIONS[word[:2]][1] not in ("flag", "help"):
        return word[:2], word[2:]
    return word, None


def _copy_args(src: str, words: _Words, expand) -> tuple:
    """``--copy SRC [DEST]``: DEST is the next word unless that is an option or ``--``."""
    dest = None
    peeked = words.next()
    if peeked is not None and not peeked[0].startswith("-"):
        dest = peeked[0]
    elif peeked is not None:
        words.push(peeked)
    if expand is not None:
        src, dest = expand(src), (expand(dest) if dest is not None else None)
    return src, dest


def _convert(value: str, kind: str, name: str, prog: str):
    if kind == "text":
        if not value:
            raise MlpMagicError(f"{prog}: {name} needs a non-empty value")
        return value
    if kind == "name":
        if not value.isidentifier():
            raise MlpMagicError(f"{prog}: {name} expects a Python variable name, got {value!r}")
        return value
    if kind == "int":
        if not value.isdigit() or int(value) <= 0:
            raise MlpMagicError(f"{prog}: {name} expects a positive integer, got {value!r}")
        return int(value)
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 1e9:
        raise MlpMagicError(f"{prog}: {name} expects a positive number of seconds, got {value!r}")
    return seconds


def _checked(options: AllrunOptions, prog: str) -> AllrunOptions:
    if options.help:
        return options
    if options.hostfile and options.hosts is not None:
        raise MlpMagicError(f"{prog}: give either --hostfile or -H, not both")
    if not options.command.strip() and options.copy is None:
        raise MlpMagicError(f"{prog}: no command given (e.g. {prog} -- hostname)")
    return options


# ------------------------------------------------------------------------- hosts


def select_hosts(options: AllrunOptions, env: Mapping | None = None):
    """(hosts, topology): one target per host of the Topology, minus ``--exclude``."""
    from .ranges import expand_hosts, fold_hosts
    from .topology import topology_from_environment

    env = os.environ if env is None else env
    topology = topology_from_environment(env, hostfile=options.hostfile, hosts=options.hosts)
    hosts = list(topology.hosts)
    if options.exclude:
        excluded = expand_hosts(options.exclude)
        names = {host.name for host in hosts}
        unknown = [name for name in excluded if name not in names]
        if unknown:
            raise MlpMagicError(f"--exclude: {unknown[0]!r} is not one of the hosts "
                                f"({fold_hosts([h.name for h in hosts])}, from {topology.source})")
        hosts = [host for host in hosts if host.name not in excluded]
        if not hosts:
            raise MlpMagicError(f"--exclude {options.exclude!r} leaves no host to run on")
    return hosts, topology


def ssh_command(options: AllrunOptions, env: Mapping | None = None) -> str:
    env = os.environ if env is None else env
    return options.ssh or env.get("MLP_MAGIC_SSH") or "ssh"


# ------------------------------------------------------------------------- running


class Plan:
    """What one allrun does, checked before anything runs: hosts, transport settings, copy."""

    def __init__(self, options: AllrunOptions, env: Mapping | None = None, check_names: bool = True):
        from . import ssh_launch as transport

        self.options = options
        hosts, self.topology = select_hosts(options, env)
        self.targets = transport.as_targets(hosts)
        self.local = len(self.targets) == 1 and self.targets[0].is_local
        self.ssh = transport.ssh_argv(ssh_command(options, env))
        if not self.local and transport.find_program(self.ssh[0]) is None:
            raise MlpMagicError(f"--ssh: cannot find the command {self.ssh[0]!r}")
        if options.copy:
            transport.check_copy_source(options.copy[0])
        if options.outdir:
            _check_outdir(options.outdir)   # before anything starts
        # Unknown host names are refused by the transport before any command runs (the check
        # overlaps the ssh handshakes; commands wait for it).
        self.check_names = check_names

    def start_early(self):
        """Start every host's ssh now, before the event loop and asyncio's import (the CLI's cold
        start: the handshakes, most of the time, overlap the interpreter's remaining start-up).
        Returns the Launch for ``run_plan``, or None where the run cannot start this way."""
        from .ssh_launch import Launch, gated

        options = self.options
        if options.copy or not options.command.strip() or options.fanout < len(self.targets):
            return None   # a copy goes first, or hosts wait for fanout slots
        launch = Launch(self.targets, options.command, ssh=self.ssh, local=self.local,
                        connect_timeout=options.connect_timeout,
                        gated=gated(self.check_names, None, options.fanout, len(self.targets)))
        launch.start_all()
        return launch

    def runner_options(self, check_names: bool) -> dict:
        options = self.options
        return dict(ssh=self.ssh, fanout=options.fanout, connect_timeout=options.connect_timeout,
                    timeout=options.timeout, local=self.local, check_names=check_names and self.check_names)


def _check_outdir(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise MlpMagicError(f"--outdir {path!r}: {err.strerror or err}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise MlpMagicError(f"--outdir {path!r}: not writable")


def run_plan(plan: Plan, on_output: Callable | None = None, early=None,
             interrupted: bool = False) -> list[HostResult]:
    """Copy (when asked), then run the command; blocking, Ctrl-C keeps partial results.
    ``early``: the Launch of ``plan.start_early()``, its processes already running;
    ``interrupted``: a Ctrl-C came before (the runners start stopped, and stop what started)."""
    try:
        return _run_plan(plan, on_output, early, interrupted)
    finally:
        if early is not None:
            early.stop_unclaimed()   # a second Ctrl-C before the runner took them


def _run_plan(plan: Plan, on_output: Callable | None, early, interrupted: bool = False) -> list[HostResult]:
    from . import ssh_transport as transport

    options = plan.options
    results: dict[str, HostResult] = {}
    targets = plan.targets
    if options.copy:
        src, dest = options.copy
        copy = transport.HostRunner(
            targets, transport.copy_command(src, dest or os.path.abspath(src)), stdin_path=src,
            **plan.runner_options(check_names=True))
        copied = run_blocking(copy, on_output, interrupted)
        for result in copied:
            if result.status != OK:   # this host's result is the failed copy
                result.stderr = f"allrun: --copy {src} failed\n{result.stderr}"
                results[result.host] = result
            elif not options.command.strip():
                results[result.host] = result
        if any(r.status == INTERRUPTED for r in copied):
            targets = []   # Ctrl-C during the copy: do not go on to the command
        targets = [t for t in targets if t.name not in results]
    if targets and options.command.strip():
        runner = transport.HostRunner(targets, options.command, outdir=options.outdir, launch=early,
                                      **plan.runner_options(check_names=not options.copy))
        for result in run_blocking(runner, on_output, interrupted):
            results[result.host] = result
    return [results.get(t.name) or HostResult(t.name, INTERRUPTED, None) for t in plan.targets]


def run_blocking(runner, on_output: Callable | None = None, interrupted: bool = False) -> list[HostResult]:
    """Run a HostRunner in a worker thread's event loop; ``on_output`` is called in *this*
    thread (safe for a notebook's display). KeyboardInterrupt here interrupts the runner, which
    then returns every result (unfinished hosts marked interrupted); a second one propagates.
    ``interrupted``: the first Ctrl-C came already (the runner starts stopped)."""
    import queue
    import threading

    lines: queue.SimpleQueue = queue.SimpleQueue()
    finished = object()
    outcome: dict = {}
    skipped = [0]

    def enqueue(host: str, stream: str, line: str) -> None:
        # A flood must not grow memory when the display falls behind: the live view is
        # best-effort; the results (and --outdir) keep the output.
        if lines.qsize() < LIVE_BACKLOG:
            lines.put((host, stream, line))
        else:
            skipped[0] += 1

    if on_output is not None:
        runner.on_output = enqueue

    def work() -> None:
        import asyncio

        try:
            outcome["results"] = asyncio.run(runner.run())
        except BaseException as error:  # handed to the calling thread
            outcome["error"] = error
        finally:
            lines.put(finished)

    from .interrupts import InterruptsDeferred, dropped_interrupt

    thread = threading.Thread(target=work, name="allrun", daemon=True)
    asked_before, interrupted, started = interrupted, False, False
    while True:
        try:
            if not started:
                # Start the worker whole (signals deferred); a Ctrl-C that came meanwhile, or as
                # the handlers come back, is handled below like any first one.
                with InterruptsDeferred() as deferred:
                    thread.start()
                    started = True
                    _prefetch_renderers()  # while the hosts work: the summary shows at once
                if asked_before or deferred.asked:
                    asked_before = False
                    raise KeyboardInterrupt
            if dropped_interrupt():   # one CPython dropped (the CLI notices them)
                raise KeyboardInterrupt
            item = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        except KeyboardInterrupt:
            if interrupted:
                raise
            interrupted = True
            runner.request_interrupt()
            continue
        if item is finished:
            break
        on_output(*item)
    thread.join()
    if skipped[0] and on_output is not None:
        on_output("allrun", "stderr", f"[{skipped[0]} lines not shown live: the display fell behind]")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["results"]


def _prefetch_renderers() -> None:
    from . import grouping, render_text  # noqa: F401

    return None


def exit_status(results: list[HostResult]) -> int:
    """0 all ok; 130 interrupted; 255 a host unreachable or timed out; else the largest exit."""
    statuses = {r.status for r in results}
    if INTERRUPTED in statuses:
        return EXIT_INTERRUPTED
    if statuses & {UNREACHABLE, TIMEOUT}:
        return EXIT_UNREACHABLE
    codes = [r.exit_code for r in results if r.status == FAILED and r.exit_code is not None]
    return min(max(codes, default=0), 255) or (1 if FAILED in statuses else 0)


# ------------------------------------------------------------------------- showing


def summary_groups(results: list[HostResult], group: bool = True) -> list:
    from .grouping import group_results

    if group:
        return group_results(results)
    return [g for r in results for g in group_results([r])]


def footer(results: list[HostResult]) -> str:
    """One line: counts per status, the hosts that did not finish, the slowest host's time."""
    counts: dict[str, list] = {}
    for r in results:
        counts.setdefault(r.status, []).append(r.host)
    from .ranges import fold_hosts

    parts = [f"{len(names)} {status}" for status, names in counts.items()]
    note = ""
    if INTERRUPTED in counts:
        note = f"; not finished: {fold_hosts(counts[INTERRUPTED])}"
    slowest = max((r.seconds for r in results), default=0.0)
    hosts = "1 host" if len(results) == 1 else f"{len(results)} hosts"
    return f"allrun: {hosts}: {', '.join(parts)}{note} ({slowest:.2f} s)"


def render_text(results: list[HostResult], options: AllrunOptions, color: bool = False) -> str:
    from .render_text import render_groups_text

    groups = summary_groups(results, options.group)
    return render_groups_text(groups, color=color, diff=options.diff)


def render_html(results: list[HostResult], options: AllrunOptions) -> str:
    from .render_html import render_groups_html

    return render_groups_html(summary_groups(results, options.group), diff=options.diff)


def results_json(results: list[HostResult]) -> str:
    import json

    return json.dumps([r.to_json() for r in results])


# ------------------------------------------------------------------------- notebook


class HostFailure(Exception):
    """Raised by %allrun after the grouped output is shown when a host did not succeed, so that
    "Run all" stops there; its traceback is one line (the details are on screen)."""

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


class AllrunOutcome(Record):
    """What ``%allrun -o NAME`` stores: the per-host results and their rendered summary."""

    results: list = fresh(list)
    text: str = ""
    html: str = ""
    exit_status: int = 0

    def __iter__(self):
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, host: str) -> HostResult:
        for result in self.results:
            if result.host == host:
                return result
        raise KeyError(host)

    @property
    def ok(self) -> bool:
        return all(r.status == OK for r in self.results)

    @property
    def stdout(self) -> dict:
        return {r.host: r.stdout for r in self.results}

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return f"<AllrunOutcome {footer(self.results)}; exit status {self.exit_status}>"


def run_allrun_line(line: str, cell: str | None, user_ns: Mapping | None = None, *,
                    env: Mapping | None = None, on_output: Callable | None = None,
                    transport: Callable | None = None) -> tuple[AllrunOptions, AllrunOutcome]:
    """Parse a magic line (and cell), run it, render it; no display. ``transport``, when given,
    replaces ssh: ``transport(host_names, command, timeout, on_output) -> list[HostResult]``
    (e.g. the live engines of a World, one per host)."""
    options = parse_allrun_line(line, cell, env, user_ns)
    if transport is not None and not options.copy:
        hosts, _ = select_hosts(options, env)
        results = transport([h.name for h in hosts], options.command, options.timeout, on_output)
    else:
        results = run_plan(Plan(options, env), on_output)
    outcome = AllrunOutcome(results, render_text(results, options), render_html(results, options),
                            exit_status(results))
    return options, outcome


def allrun_magic(line: str, cell: str | None, user_ns: dict | None = None, *,
                 env: Mapping | None = None, transport: Callable | None = None) -> None:
    """``%allrun CMD`` / ``%%allrun``: live lines tagged by host, replaced at the end by the
    grouped summary (HTML in a notebook, text in a terminal); ``-o NAME`` stores the
    AllrunOutcome in the notebook; raises HostFailure when a host did not succeed."""
    from .live_display import LiveOutput

    live = LiveOutput()

    def show_line(host: str, stream: str, text: str) -> None:
        live.add([(host, stream, text + "\n")])

    options, outcome = run_allrun_line(line, cell, user_ns, env=env, on_output=show_line,
                                       transport=transport)
    note = footer(outcome.results)
    live.finish({"text/plain": f"{outcome.text.rstrip()}\n{note}",
                 "text/html": f"{outcome.html}<div style='color:#777;font-size:85%'>{_escape(note)}</div>"})
    if options.out and user_ns is not None:
        user_ns[options.out] = outcome
    if not outcome.ok:
        bad = [r for r in outcome.results if r.status != OK]
        from .ranges import fold_hosts

        raise HostFailure(f"{' / '.join(sorted({r.status for r in bad}))} on "
                          f"{fold_hosts([r.host for r in bad])} ({len(bad)} of {len(outcome)} hosts); "
                          "details above")


def _escape(text: str) -> str:
    import html

    return html.escape(text)
