"""Which rank died, and how: read from the launcher's log (pure text in, sentence out)."""
from __future__ import annotations

import re

# Each engine's nanny logs its parent's death; the first such line names the first rank to go.
_NANNY_DEATH = re.compile(r"Parent (\d+) exited with status")
# What the MPI launchers themselves say when a rank ends badly.
_LAUNCHER_LINES = re.compile(
    r"(exited on signal|non-zero status|Exit code:|Process name:|killed|Segmentation fault"
    r"|EXIT CODE|BAD TERMINATION)",
    re.IGNORECASE,
)


def first_dead_pid(log_text: str) -> int | None:
    match = _NANNY_DEATH.search(log_text)
    return int(match.group(1)) if match else None


def launcher_report(log_text: str, limit: int = 6) -> list:
    lines = [line.strip() for line in log_text.splitlines() if _LAUNCHER_LINES.search(line)]
    return lines[:limit]


def death_note(log_text: str, rank_of_pid: dict, host_of_rank) -> str:
    pid = first_dead_pid(log_text)
    rank = rank_of_pid.get(pid)
    who = (f"rank {rank} (pid {pid} on {host_of_rank(rank)}) died first"
           if rank is not None else "a rank's process exited")
    detail = "; ".join(launcher_report(log_text))
    return (f"{who} during the cell" + (f" [{detail}]" if detail else "")
            + "; an MPI world cannot be partly restarted: `%mpirun --restart` starts all ranks again")
