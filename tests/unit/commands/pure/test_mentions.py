"""The docs' option check (commands/pure/mentions): every option the table knows passes, any
other is named with its line, and what follows a mention's options is not ours."""
import glob
import os

from hypothesis import given, strategies as st

from mlp_magic.commands.pure.mentions import Mention, mention_text, unknown_options
from mlp_magic.commands.pure.table import ALLRUN, COMMANDS, MPIRUN

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
MPIRUN_WORDS = sorted({name for verb in MPIRUN for option in (*verb.options, *verb.magic_options)
                       for name in option.names if not option.takes_value}
                      | {verb.flag.names[0] for verb in MPIRUN
                         if verb.flag is not None and verb.rest != "expression" and verb.flag.kind is None})


@given(st.lists(st.sampled_from(MPIRUN_WORDS), min_size=1, max_size=6))
def test_any_flags_the_mpirun_verbs_take_pass(words):
    assert unknown_options(f"`%mpirun {' '.join(words)}`") == []


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=12))
def test_an_option_no_verb_takes_is_named_with_its_line(name):
    word = f"--{name}"
    known = {n for verb in MPIRUN for o in (*verb.options, *verb.magic_options) for n in o.names}
    known |= {n for verb in MPIRUN if verb.flag is not None for n in verb.flag.names}
    text = f"intro\n\n```\n%%mpirun -np 4 {word}\n```\n"
    expected = [] if word in known else [Mention(4, "%mpirun", word)]
    assert unknown_options(text) == expected


def test_every_command_and_its_options_pass():
    lines = [f"`mlp-magic {verb.command} {' '.join(o.names[0] for o in verb.options if not o.takes_value)}`"
             for verb in COMMANDS]
    assert unknown_options("\n".join(lines)) == []
    flags = " ".join(o.names[0] for o in ALLRUN.options if not o.takes_value)
    assert unknown_options(f"`allrun {flags} -- ls`") == []


def test_an_unknown_command_is_named_with_the_commands():
    [mention] = unknown_options("run `mlp-magic frobnicate --x`")
    assert mention == Mention(1, "mlp-magic frobnicate", "")
    assert "no such command" in mention_text(mention) and "doctor" in mention_text(mention)


def test_values_scripts_expressions_and_remote_commands_are_not_ours():
    text = "\n".join([
        "`%mpirun -np 4 train.py --lr 0.5 --timeout 3`",      # the script's own options
        "`%mpirun --compare x --bogus`",                       # the rest is the expression
        "`%mpirun --ranks 0-3 --timeout 5 --where`",           # values are skipped
        "`allrun -H worker[0-3] -- pip --verbose install x`",  # the remote command's
        "`%allrun pip install --upgrade x`",
        "`mlp-magic --help`",
    ])
    assert unknown_options(text) == []


def test_prose_and_other_words_are_not_mentions():
    text = "the mlp-magic command, my-allrun --x, mlp_magic.allrun --y, and `--nothing` alone"
    assert unknown_options(text) == []


def test_a_table_cell_ends_the_mention():
    assert unknown_options("| `%mpirun --where` | --whatever in the next cell |") == []
    assert unknown_options("| `%mpirun --wherever` | x |") == [Mention(1, "%mpirun", "--wherever")]


def test_the_projects_documents_mention_only_real_options():
    docs = glob.glob("docs/**/*.md", recursive=True, root_dir=ROOT)
    paths = ["README.md", "ARCHITECTURE.md", "SECURITY.md", *docs]
    found = []
    for path in paths:
        with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
            found += [f"{path}:{m.line}: {mention_text(m)}" for m in unknown_options(handle.read())]
    assert found == []
