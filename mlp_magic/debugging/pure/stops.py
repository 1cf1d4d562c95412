"""Breakpoints, the pure part: which pdb commands may be sent to the ranks, and where they stopped,
grouped (ranks at one position are one group) and shown with the source around it.

A position is the rank's answer (debugging/rank/debugger.position): ``{"file", "line",
"function", "source": [[n, text], ...]}``, ``file`` being ``cell`` for any cell, so that ranks
stopped at one line of one cell share one position whatever their kernel named the cell.
"""
from __future__ import annotations

from mlp_magic.core.records import Record
from mlp_magic.core.ranges import quote
from mlp_magic.errors import MlpMagicError
from mlp_magic.output.pure.grouping import ranks_label

# pdb's commands that move a rank on: it runs until it stops again (or its cell ends)
RESUMING = frozenset({"n", "next", "s", "step", "c", "cont", "continue", "r", "return", "unt", "until"})
QUITTING = frozenset({"q", "quit", "exit"})
# pdb's commands that would read pdb's own stdin or start a program anew: no rank can serve them
REFUSED = {"interact": "it reads a console's input",
           "debug": "a debugger inside the debugger reads its own input",
           "commands": "it reads the commands that follow from pdb's input",
           "run": "it restarts the program", "restart": "it restarts the program",
           "EOF": "it is pdb's own end of input"}
HINT = "`%mpirun --pdb CMD` sends a pdb command to them (`c` continues, `q` ends the debugging)"


CONTINUING = frozenset({"c", "cont", "continue"})


class PdbCommand(Record, frozen=True):
    """One line for pdb: ``words`` are its commands' first words (pdb runs ``a;; b`` as two)."""
    text: str
    words: tuple

    @property
    def word(self) -> str:
        return self.words[0]

    @property
    def resumes(self) -> bool:
        return any(word in RESUMING for word in self.words)

    @property
    def continues(self) -> bool:
        return any(word in CONTINUING for word in self.words)

    @property
    def quits(self) -> bool:
        return any(word in QUITTING for word in self.words)


def parse_command(text: str) -> PdbCommand:
    """One pdb command line, as typed after ``--pdb``; one error naming what cannot be sent."""
    line = (text or "").strip()
    if not line.strip("'\"; "):   # '', "", ;; : nothing for pdb to run
        raise MlpMagicError("%mpirun --pdb: the command is empty: give a pdb command such as "
                            "`p loss`, `n`, `c` or `q` (`%mpirun --pdb` alone lists the stopped ranks)")
    if "\n" in line:
        raise MlpMagicError("%mpirun --pdb: one command per line; a block of Python goes in a "
                            "`%%mpirun --pdb` cell")
    words = tuple(_first_word(part) for part in line.split(";;") if part.strip()) or ("",)
    for word in words:
        if word in REFUSED:
            raise MlpMagicError(f"%mpirun --pdb: {quote(word)} cannot be sent to the ranks: {REFUSED[word]}")
    return PdbCommand(text=line, words=words)


def _first_word(command: str) -> str:
    word = command.split(None, 1)[0]
    return "!" if word.startswith("!") else word


def position_key(where: dict) -> tuple:
    return (where.get("file", "?"), int(where.get("line", 0)), where.get("function", "?"))


def group_positions(wheres: dict) -> list:
    """[(ranks, where)] for {rank: where}: the ranks at one position together, the groups in the
    order of their first rank."""
    groups: dict = {}
    for rank in sorted(wheres):
        key = position_key(wheres[rank])
        groups.setdefault(key, ([], wheres[rank]))[0].append(rank)
    return sorted(groups.values(), key=lambda group: group[0][0])


def position_text(where: dict) -> str:
    """ "cell:3 <module>" """
    return f"{where.get('file', '?')}:{where.get('line', '?')} {where.get('function', '?')}"


def source_lines(where: dict) -> list:
    """The source around the line, the line itself marked: ``  ->  3  y = x + 1``."""
    line = int(where.get("line", 0))
    width = len(str(max([n for n, _ in where.get("source") or []] or [line])))
    return [f"  {'->' if n == line else '  '} {n:>{width}}  {text}".rstrip()
            for n, text in where.get("source") or []]


def stops_text(wheres: dict, running=(), finished=()) -> str:
    """Every group of stopped ranks with its source; then the ranks still running or finished."""
    lines = []
    for ranks, where in group_positions(wheres):
        lines.append(f"{ranks_label(ranks)} stopped at {position_text(where)}")
        lines.extend(source_lines(where))
    for ranks, what in ((sorted(running), "still running"), (sorted(finished), "finished")):
        if ranks:
            lines.append(f"{ranks_label(ranks)} {what}")
    return "\n".join(lines)
