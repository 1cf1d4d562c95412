"""The docs' own Sphinx extension: reference pages made from the command table, and a check that
every option a page mentions exists.

- ``{mlp-verbs} mpirun`` (or ``allrun``, ``mlp_cluster``, ``mlp_stacks``, ``mlp_doctor``,
  ``commands``) writes each verb with its options, from ``mlp_magic/commands/pure/table``: the
  reference cannot drift from what the parser takes.
- Every Markdown page is read for magics and commands with options
  (``mlp_magic.commands.pure.mentions``); an option or command that does not exist is a warning
  at its line, which the build (``-W``) makes an error.
"""
from __future__ import annotations

import re

from docutils.parsers.rst import directives
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from mlp_magic.commands.pure.mentions import mention_text, unknown_options
from mlp_magic.commands.pure.table import ALLRUN, COMMANDS, verbs_of_magic

logger = logging.getLogger(__name__)


def _option_words(option) -> str:
    names = " / ".join(f"`{name}{' ' + option.metavar if option.metavar else ''}`" for name in option.names)
    return names.replace("|", "\\|")


def _help_markdown(text: str) -> str:
    """Option words as code (else Markdown makes ``--attach`` a dash), pipes escaped for the table."""
    return re.sub(r"(?<![\w`])(--?[a-z][\w-]*)", r"`\1`", text).replace("|", "\\|")


def _verb_usage(verb) -> str:
    if verb.command and not verb.magic:
        return f"mlp-magic {verb.command}"
    if verb.command == "allrun" and verb.magic == "":
        return "allrun"
    prefix = "%%" if verb.form == "cell" else "%"
    flag = ""
    if verb.flag is not None:
        flag = " " + verb.flag.names[0] + (f" {verb.flag.metavar}" if verb.flag.metavar else "")
    rest = {"script": " script.py [args...]", "command": " COMMAND", "id": " [ID]"}.get(verb.rest, "")
    return f"{prefix}{verb.magic}{flag}{rest}"


def _verb_markdown(verb, terminal: bool) -> list:
    usage = f"mlp-magic {verb.command}" if terminal and verb.command and verb.command != "allrun" else (
        "allrun" if terminal else _verb_usage(verb))
    lines = [f"**`{usage}`**: {_help_markdown(verb.summary)}", ""]
    options = [*verb.options, *(verb.command_options if terminal else verb.magic_options)]
    if options:
        lines += ["| option | meaning |", "|---|---|"]
        lines += [f"| {_option_words(o)} | {_help_markdown(o.help)} |" for o in options]
        lines.append("")
    return lines


class VerbsDirective(SphinxDirective):
    """The verbs of one magic, or every ``mlp-magic`` command, as Markdown tables."""

    required_arguments = 1
    option_spec = {"terminal": directives.flag}

    def run(self):
        which = self.arguments[0]
        terminal = "terminal" in self.options or which == "commands"
        if which in ("commands", "allrun-command"):
            verbs = COMMANDS if which == "commands" else (ALLRUN,)
        else:
            verbs = verbs_of_magic(which)
        if not verbs:
            raise self.error(f"mlp-verbs: no magic or command list named {which!r}")
        text = []
        for verb in verbs:
            text += _verb_markdown(verb, terminal or which == "allrun-command")
        node = self.parse_text_to_nodes("\n".join(text))
        return node


def _check_options(app, docname: str, source: list) -> None:
    if not app.env.doc2path(docname).suffix == ".md":
        return
    for mention in unknown_options(source[0]):
        logger.warning(mention_text(mention), location=(docname, mention.line), type="mlp", subtype="option")


def setup(app):
    app.add_directive("mlp-verbs", VerbsDirective)
    app.connect("source-read", _check_options)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
