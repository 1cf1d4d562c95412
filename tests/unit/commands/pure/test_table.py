"""The table of verbs: its handlers exist, its spellings do not collide, every option is used,
its labels read well in messages, and ``options_for`` gives the defaults."""
from __future__ import annotations

import importlib
import re

import pytest

from mlp_magic.commands.pure import options as defined
from mlp_magic.commands.pure.table import (ALLRUN, BOTH, CELL, CELL_DEFAULT, CLUSTER, COMMANDS, DOCTOR, LINE,
                                           LINE_DEFAULT, MPIRUN, STACKS, command_verb, options_for,
                                           verbs_of_magic)
from mlp_magic.core.options import OFF, Option

VERBS = tuple({id(verb): verb for verb in (*MPIRUN, ALLRUN, CLUSTER, STACKS, DOCTOR, *COMMANDS)}.values())
MAGICS = tuple(dict.fromkeys(verb.magic for verb in VERBS if verb.magic))


def every_option(verb) -> tuple:
    return (*verb.options, *verb.magic_options, *verb.command_options)


def verb_id(verb) -> str:
    return f"{verb.magic or 'mlp-magic'}:{verb.name}"


@pytest.mark.parametrize("verb", VERBS, ids=verb_id)
def test_each_handler_names_a_function_that_exists(verb):
    assert verb.run or verb.run_command, "a verb nobody can call"
    assert bool(verb.run) == bool(verb.magic) and bool(verb.run_command) == bool(verb.command)
    for path in filter(None, (verb.run, verb.run_command)):
        module, sep, name = path.partition(":")
        assert sep and name, path
        assert callable(getattr(importlib.import_module(module), name, None)), path


@pytest.mark.parametrize("magic", MAGICS)
def test_within_a_magic_no_two_verbs_share_a_flag(magic):
    spellings = [name for verb in verbs_of_magic(magic) if verb.flag is not None for name in verb.flag.names]
    assert len(spellings) == len(set(spellings))
    labels = [verb.label for verb in verbs_of_magic(magic)]
    assert len(labels) == len(set(labels))


@pytest.mark.parametrize("magic", MAGICS)
def test_within_a_magic_a_spelling_is_one_option(magic):
    """The magic's line is parsed against all its verbs' options at once: a spelling must mean
    the same option (field and kind) whichever verb the line turns out to name."""
    seen: dict = {}
    for verb in verbs_of_magic(magic):
        for option in (*verb.options, *verb.magic_options):
            for name in option.names:
                assert seen.setdefault(name, option) == option, (magic, name)


@pytest.mark.parametrize("verb", VERBS, ids=verb_id)
def test_within_a_verb_no_two_options_share_a_spelling_or_a_field(verb):
    options = (*every_option(verb), *([verb.flag] if verb.flag is not None else []))
    spellings = [name for option in options for name in option.names]
    assert len(spellings) == len(set(spellings)), spellings
    dests = [option.dest for option in options]
    assert len(dests) == len(set(dests)), dests
    for option in options:
        assert option.names and all(re.fullmatch(r"--?[a-zA-Z][a-z0-9-]*", name) for name in option.names)
        assert option.dest.isidentifier() or option.dest.startswith("verb:")


def test_every_option_defined_is_used_by_some_verb():
    used = [option for verb in VERBS for option in every_option(verb)]
    unused = [name for name, value in vars(defined).items()
              if isinstance(value, Option) and not any(value is option for option in used)]
    assert unused == []


@pytest.mark.parametrize("verb", VERBS, ids=verb_id)
def test_each_label_reads_well(verb):
    label = verb.label
    assert label == label.strip() and label and "None" not in label
    if verb.flag is not None:
        assert label == verb.flag.names[0] and re.fullmatch(r"--[a-z][a-z-]*", label)
    elif verb.rest == "script":
        assert label == "a script"
    elif verb.magic:
        assert label == f"%{'%' if verb.form == CELL else ''}{verb.magic}"
    else:
        assert label == f"mlp-magic {verb.command}"
    assert verb.summary and not verb.summary.endswith(".")


@pytest.mark.parametrize("verb", VERBS, ids=verb_id)
def test_options_for_gives_each_default(verb):
    options = options_for(verb)
    for option in every_option(verb):
        expected = option.default
        if expected is None and option.kind in (None, OFF):
            expected = option.kind == OFF   # a flag is False, a flag turning something off True
        assert getattr(options, option.dest) == expected, option.names
    assert options.given == {}


def test_options_for_takes_values():
    options = options_for(STACKS, pids=[3], timeout=2.0)
    assert (options.pids, options.timeout, options.native, options.help) == ([3], 2.0, False, False)
    assert options_for(ALLRUN, command="ls").command == "ls"   # what a handler reads besides options


def test_the_magics_and_commands():
    assert verbs_of_magic("mpirun") == MPIRUN
    assert verbs_of_magic("allrun") == (ALLRUN,) and verbs_of_magic("nope") == ()
    assert [verb.name for verb in verbs_of_magic("mlp_stacks")] == ["stacks"]
    assert all(command_verb(verb.command) is verb for verb in COMMANDS)
    assert command_verb("allrun") is None and command_verb("nope") is None
    defaults = {verb.name: verb for verb in MPIRUN if verb.flag is None or verb.name == LINE_DEFAULT}
    assert defaults[CELL_DEFAULT].form in (CELL, BOTH) and defaults[LINE_DEFAULT].form in (LINE, BOTH)
    assert all(verb.form in (LINE, CELL, BOTH) for verb in VERBS)
    assert all(verb.rest in ("", "command", "script", "expression", "id") for verb in VERBS)
