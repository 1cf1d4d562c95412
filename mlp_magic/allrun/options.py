"""``allrun``'s options, from the command's argv or a magic's line (pure).

Options come first; the command is everything after them (or after ``--``), passed on exactly as
written and run by each host's shell. In a magic, ``$NAME`` in an option's value comes from the
environment, then the notebook; the command's ``$NAME`` is left to the remote shell.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping  # not typing: its import slows the allrun CLI's start

from mlp_magic.core.records import Record
from mlp_magic.errors import MlpMagicError

DEFAULT_FANOUT = 64
DEFAULT_CONNECT_TIMEOUT = 10.0
EXIT_BAD_INPUT = 2


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
    from mlp_magic.core.line_args import expand_vars  # argparse: only a magic's line needs it

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
        # ASCII digits only: str.isdigit() accepts '²', which int() refuses
        if not (value.isascii() and value.isdigit() and len(value) < 10) or int(value) <= 0:
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
