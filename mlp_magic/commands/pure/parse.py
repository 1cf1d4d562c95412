"""From what the user wrote to a verb and its options: a magic's line (and cell), a command's argv.

One way for every magic: the line's ``$NAME`` are expanded (from the environment, then the
notebook), its words parsed by core/options against the options of the magic's verbs, the verb
chosen (its flag, a script word, the form), and every option checked against that verb's own.
``%allrun``'s command is the exception to the expansion: it is the remote shell's, as written.
"""
from __future__ import annotations

import re

from mlp_magic.commands.pure.table import CELL, CELL_DEFAULT, LINE, LINE_DEFAULT, Verb, verbs_of_magic
from mlp_magic.core.options import Options, expand_vars, parse, split_words
from mlp_magic.errors import MlpMagicError

EXPANSION_NOTE = " (the line {line!r} expanded to {expanded!r})"


class Choice:
    """The verb a line names, its options, and what followed them (a script and its arguments)."""

    def __init__(self, verb: Verb, options: Options):
        self.verb, self.options = verb, options


def words_of(line: str, prog: str) -> list:
    try:
        return list(split_words(line))
    except MlpMagicError as err:
        raise MlpMagicError(f"{prog}: cannot split {line.strip()!r}: {err}") from None


def family(verbs, form: str) -> tuple:
    """Every option and flag the magic's verbs take (a flag that is also an option of this form's
    default verb, ``--restart`` in a cell, is that option there)."""
    options = {o.names[0]: o for verb in verbs for o in (*verb.options, *verb.magic_options)}
    in_form = {o.names[0] for verb in verbs if verb.form in (form, "both") and verb.flag is None
               for o in verb.options}
    flags = [verb.flag for verb in verbs if verb.flag is not None and verb.flag.names[0] not in in_form]
    return (*options.values(), *flags)


def choose_verb(verbs, given: dict, script: bool, form: str, prog: str, default: str) -> Verb:
    """The one verb the flags (or a script) name; refused when two are named, or in the wrong form."""
    named = [verb for verb in verbs if verb.flag is not None and verb.flag.dest in given]
    takes_word = any(verb.rest == "id" for verb in named)   # --attach ID: the word is no script
    named += [verb for verb in verbs if script and verb.rest == "script" and not takes_word]
    if len(named) > 1:
        raise MlpMagicError(f"{prog}: {named[0].label} and {named[1].label} do not go together")
    verb = named[0] if named else next(v for v in verbs if v.name == default)
    if verb.form not in (form, "both"):
        raise MlpMagicError(_wrong_form(verb, prog))
    return verb


def _wrong_form(verb: Verb, prog: str) -> str:
    if verb.form == CELL:
        return f"{prog}: {verb.label} runs a cell: %%{verb.magic} {verb.label}, then the code"
    if verb.rest == "script":
        return ("looks like a script, which the line form runs (%mpirun script.py args); the cell form "
                "takes options only")
    return f"{prog}: {verb.label} is a line form (%{verb.magic} {verb.label})"


def refuse_others(verb: Verb, given: dict, prog: str) -> None:
    """An option of another verb of the magic: one line saying it does not go with this one."""
    own = {o.dest for o in (*verb.options, *verb.magic_options)}
    named = verb.flag is not None and verb.flag.dest in given
    for dest, spelled in given.items():
        if dest not in own and not dest.startswith("verb:"):
            alone = "" if named or verb.flag is None else f" ({prog} alone)"
            raise MlpMagicError(f"{prog}: {spelled} does not go with {verb.label}{alone}")


# ---------------------------------------------------------------------------- --compare, --pdb
# --compare takes the rest of the line as a Python expression, --pdb as a pdb command (no $NAME
# expansion, no shell quoting: "x['a']" stays as written); the options that may follow it are
# taken off its end. (the patterns compile when first used: allrun's start-up never needs them)
_REST_FLAG = r"(?:^|\s)--(compare|pdb)(?:=|\s+|$)"
_OPTION = r"(?:--ranks|--targets|-o|--out|--timeout)(?:\s+|=)\S+"
_AFTER_REST = rf"\s+{_OPTION}\s*$"
_BEFORE_REST = rf"^\s*{_OPTION}\s+(?=\S)"


def split_expression(line: str, options) -> tuple:
    """"-o c --compare m.w[0] --ranks 1-3" -> ("-o c --ranks 1-3", "m.w[0]", "compare"); (line,
    None, None) without --compare or --pdb, or when a script comes first (the flag is then the
    script's). --pdb's command may be empty (the stopped ranks are listed)."""
    found = re.search(_REST_FLAG, line)
    if found is None or _script_before(line[:found.start()], options):
        return line, None, None
    flag = found.group(1)
    head, expr, tail = line[:found.start()], " " + line[found.end():], ""
    while (before := re.match(_BEFORE_REST, expr)) is not None:
        expr, head = " " + expr[before.end():], f"{head} {before.group(0)}"
    while (after := re.search(_AFTER_REST, expr)) is not None:
        expr, tail = expr[:after.start()], after.group(0) + tail
    expr = expr.strip()
    if flag == "compare" and expr[:1] in "'\"" and expr[-1:] == expr[:1] and len(expr) > 1 \
            and expr[0] not in expr[1:-1]:
        expr = expr[1:-1]
    if flag == "compare" and not expr.strip():
        raise MlpMagicError("%mpirun: --compare: give an expression, the rest of the line "
                            "(e.g. %mpirun --compare model.state_dict())")
    ours = sorted(set(expr.split()) & {name for option in options for name in option.names})
    if ours:
        raise MlpMagicError(f"%mpirun: --{flag} takes the rest of the line, {ours[0]} included; "
                            f"put it before --{flag}, or drop it")
    return head + tail, expr, flag


def _script_before(head: str, options) -> bool:
    try:
        return parse(split_words(head), options, "%mpirun").rest is not None
    except MlpMagicError:   # unbalanced quotes, unknown options...: the full parse says so
        return False


# ---------------------------------------------------------------------------- a magic's line
def choose_in_line(magic: str, line: str, cell: str | None, env, user_ns=None) -> Choice:
    """``%mpirun``-like magics (and %mlp_cluster, %mlp_stacks, %mlp_doctor): the whole line's
    ``$NAME`` expanded, then its verb and options. An error names what the line became when
    ``$NAME`` changed it (else "unrecognized argument '4'" is a riddle)."""
    prog = f"%{'%' if cell is not None else ''}{magic}"
    verbs = verbs_of_magic(magic)
    options = family(verbs, LINE if cell is None else CELL)
    line, expression, flag = split_expression(line or "", options) if magic == "mpirun" \
        else (line or "", None, None)
    try:
        expanded = expand_vars(line, env, user_ns)
    except MlpMagicError as err:
        raise MlpMagicError(f"{prog}: {err}") from None
    try:
        return _choose(verbs, options, expanded, (expression, flag), cell, prog)
    except MlpMagicError as err:
        if expanded == line:
            raise
        note = EXPANSION_NOTE.format(line=line.strip(), expanded=expanded.strip())
        raise MlpMagicError(f"{err}{note}") from None


def _choose(verbs, options, line: str, rest: tuple, cell, prog: str) -> Choice:
    """``rest``: (the rest of the line --compare or --pdb took, that flag's name) or (None, None)."""
    form = LINE if cell is None else CELL
    words = words_of(line, prog)
    parsed = parse(words, options, prog)
    given = dict(parsed.given)
    expression, flag = rest
    if expression is not None:
        given[f"verb:{flag}"] = f"--{flag}"
    script = [word for word, position in words if parsed.rest is not None and position >= parsed.rest]
    if script and any(v.rest == "id" and v.flag is not None and v.flag.dest in given for v in verbs):
        script = _options_after_id(words, parsed, given, options, prog)
    _flags_spelled_as_options(verbs, options, given, bool(script), form)
    default = (LINE_DEFAULT if form == LINE else CELL_DEFAULT) if len(verbs) > 1 else verbs[0].name
    verb = _one_verb(verbs, given, script, form, prog, default)
    refuse_others(verb, given, prog)
    values = {k: v for k, v in parsed.values.items() if not k.startswith("verb:")}
    found = Options((*verb.options, *verb.magic_options), values, given)
    if verb.rest == "id":
        found.world_id, script = one_id(script, prog, verb.label), []
    found.script, found.script_args = (script[0], tuple(script[1:])) if script else (None, ())
    found.expression = expression
    valued = verb.flag is not None and verb.flag.takes_value
    found.name = parsed.values.get(verb.flag.dest) if valued else None
    return Choice(verb, found)


def _options_after_id(words: list, parsed, given: dict, options, prog: str) -> list:
    """``--attach ID --force``: the options after the id are parsed too (into ``parsed`` and
    ``given``); the words left, the id first."""
    after = parse([(w, p) for w, p in words if p > parsed.rest], options, prog)
    parsed.values.update(after.values)
    given.update(after.given)
    first = next(w for w, p in words if p == parsed.rest)
    return [first] + [w for w, p in words if after.rest is not None and p >= after.rest]


def one_id(words: list, prog: str, label: str) -> str | None:
    """The one word a verb such as ``--attach [ID]`` takes, or None."""
    if len(words) > 1:
        raise MlpMagicError(f"{prog}: {label} takes one World id, got {' '.join(words)!r}")
    return words[0] if words else None


def _flags_spelled_as_options(verbs, options, given: dict, script: bool, form: str) -> None:
    """A verb whose flag is also an option of the line's verbs (``--restart``) is named by it only
    where no script takes the option: ``%mpirun --restart -np 2``, not ``%mpirun --restart t.py``."""
    parsed_as_flag = {option.dest for option in options if option.dest.startswith("verb:")}
    for verb in verbs:
        flag = verb.flag
        if flag is None or flag.dest in parsed_as_flag or verb.form not in (form, "both") or script:
            continue
        dest = next((o.dest for o in options if o.names[0] == flag.names[0]), None)
        if dest in given:
            given[flag.dest] = given.pop(dest)


def _one_verb(verbs, given: dict, script: list, form: str, prog: str, default: str) -> Verb:
    if script and not any(verb.rest == "script" for verb in verbs):
        raise MlpMagicError(f"{prog}: unexpected argument {script[0]!r}")
    try:
        return choose_verb(verbs, given, bool(script), form, prog, default)
    except MlpMagicError as err:
        if str(err).startswith("looks like a script"):
            raise MlpMagicError(f"{prog}: {script[0]!r} {err}") from None
        raise


# ---------------------------------------------------------------------------- allrun
def allrun_in_line(line: str, cell: str | None, env, user_ns=None) -> Options:
    """``%allrun [options] COMMAND`` (the command kept exactly as written) or ``%%allrun
    [options]`` with the cell as the script; ``$NAME`` in option values only."""
    from mlp_magic.commands.pure.table import ALLRUN

    prog = "%%allrun" if cell is not None else "%allrun"
    options = (*ALLRUN.options, *ALLRUN.magic_options)
    line = line or ""

    def expand(text: str) -> str:
        try:
            return expand_vars(text, env, user_ns)
        except MlpMagicError as err:
            raise MlpMagicError(f"{prog}: {err}") from None

    # words one at a time: the command after the options is never split (it is the remote shell's)
    parsed = _parse_allrun(_lazy_words(line, prog), options, prog, expand, line)
    found = Options(options, parsed.values, parsed.given)
    rest = line[parsed.rest:].strip() if parsed.rest is not None else ""
    if cell is not None and rest:
        raise MlpMagicError(f"%%allrun: the first line takes options only, the cell is the script "
                            f"(found {rest!r})")
    found.command = cell if cell is not None else rest
    return _checked_allrun(found, prog)


def allrun_argv(argv) -> Options:
    """The ``allrun`` command's arguments; the command words are joined with spaces (as ssh does)
    and run by the remote shell."""
    from mlp_magic.commands.pure.table import ALLRUN

    options = (*ALLRUN.options, *ALLRUN.command_options)
    words = [(word, index) for index, word in enumerate(argv)]
    parsed = _parse_allrun(words, options, "allrun", None, list(argv))
    found = Options(options, parsed.values, parsed.given)
    found.command = " ".join(argv[parsed.rest:]) if parsed.rest is not None else ""
    return found if found.help else _checked_allrun(found, "allrun")


def _lazy_words(line: str, prog: str):
    try:
        yield from split_words(line)
    except MlpMagicError as err:
        raise MlpMagicError(f"{prog}: {err}") from None


def _parse_allrun(words, options, prog: str, expand, source):
    """The options; a command after ``--copy SRC [DEST]`` needs ``--`` (else it would be DEST).
    ``source``: the line (words' positions are offsets) or the argv (indices)."""
    try:
        parsed = parse(words, options, prog, expand)
    except MlpMagicError as err:
        if "unknown option" in str(err):
            raise MlpMagicError(f"{err} (put -- before a command that starts with -)") from None
        raise
    if "copy" in parsed.values and parsed.rest is not None and not parsed.dashes:
        word = source[parsed.rest:].split()[0] if isinstance(source, str) else source[parsed.rest]
        raise MlpMagicError(f"{prog}: after --copy SRC [DEST], put -- before the command ({word!r})")
    return parsed


def _checked_allrun(found: Options, prog: str) -> Options:
    if not found.command.strip() and found.copy is None:
        raise MlpMagicError(f"{prog}: no command given (e.g. {prog} -- hostname)")
    return found
