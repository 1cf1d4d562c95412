"""What an engine needs of the Python it runs in, and the one line a World shows when a host's
Python falls short.

Engines run in the training container's own Python, which need not be the notebook's: another
image, another virtualenv, an old ipyparallel. An engine checks itself before it starts
(engine/versions) and, when something is outside these bounds, writes one tagged line and exits;
the World's start failure then leads with every refusing host's reason (``refusal_error``)
instead of a registration timeout. The bounds are pyproject.toml's (tests/unit/test_floors.py
holds them equal).
"""
from __future__ import annotations

import re
from typing import NamedTuple
from collections.abc import Mapping, Sequence

MARK = "mlp_magic cannot run in this Python:"
# a reason ends at the line's end or where another rank's line begins: ranks share the launcher's
# log, and two writing at once may land on one line
_REFUSAL = re.compile(r"\[rank (\d+)\] " + re.escape(MARK) + r" (.+?)(?=\[rank \d+\] |$)")


class Needed(NamedTuple):
    """A package the engine needs: at least ``floor``, below ``below`` (None: no upper bound);
    ``required``: missing is a problem too (else only a present one is checked)."""
    name: str
    floor: str
    below: str | None = None
    required: bool = True

    def text(self) -> str:
        return f">={self.floor}" + (f",<{self.below}" if self.below else "")


PYTHON = Needed("Python", "3.9")
ENGINE_NEEDS = (
    Needed("ipyparallel", "9.0.0", "10"),
    Needed("ipykernel", "6.23.1", "8"),
    Needed("mpi4py", "4.1.0", required=False),   # a World without MPI (--no-mpi) runs without it
)


def release(version: str) -> tuple:
    """The release numbers of a version string (``9.0.0rc1`` -> (9,), ``6.23.1`` -> (6, 23, 1)),
    trailing zeros dropped so ``7`` equals ``7.0``; () when it has none."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", version or "")
    numbers = [int(part) for part in match.group(1).split(".")] if match else []
    while numbers and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def problem(need: Needed, found: str | None) -> str | None:
    """``"ipyparallel 8.8.0 (needs >=9.0.0,<10)"``, or None when ``found`` is within bounds."""
    if found is None:
        return f"{need.name} not installed (needs {need.text()})" if need.required else None
    have = release(found)
    if have < release(need.floor) or (need.below and have >= release(need.below)):
        return f"{need.name} {found} (needs {need.text()})"
    return None


def problems(found: Mapping[str, str | None], needs: Sequence[Needed] = (PYTHON, *ENGINE_NEEDS)) -> list:
    """Every need ``found`` ({name: version or None}) falls short of, in ``needs``' order."""
    return [text for need in needs if (text := problem(need, found.get(need.name))) is not None]


def refusal_line(rank: int, found_problems: Sequence[str]) -> str:
    """The line a refusing engine writes, tagged with its launcher rank like its log lines (the
    World knows each rank's host by the name it was given, which the engine's own may not be)."""
    return f"[rank {rank}] {MARK} {'; '.join(found_problems)}"


def refusals(log_text: str, hosts_by_rank: Sequence[str]) -> dict[str, str]:
    """{host: its problems} from the refusal lines in a launcher's log (a host's first line)."""
    found: dict[str, str] = {}
    for line in log_text.splitlines():
        for match in _REFUSAL.finditer(line.strip()):
            if int(match.group(1)) < len(hosts_by_rank):
                found.setdefault(hosts_by_rank[int(match.group(1))], match.group(2).strip())
    return found


def refusal_error(log_text: str, hosts_by_rank: Sequence[str]) -> str | None:
    """One line for a start the hosts' Pythons refused, hosts with the same reason folded
    (``worker[1-2]: ipyparallel 8.8.0 (needs >=9.0.0,<10)``); None when no engine refused."""
    from mlp_magic.core.ranges import fold_hosts   # here, not at the top: every engine imports this module

    by_reason: dict[str, list] = {}
    for host, reason in refusals(log_text, hosts_by_rank).items():
        by_reason.setdefault(reason, []).append(host)
    if not by_reason:
        return None
    parts = [f"{fold_hosts(hosts)}: {reason}" for reason, hosts in by_reason.items()]
    return "the engines cannot start, mlp_magic needs another Python there: " + "; ".join(parts)
