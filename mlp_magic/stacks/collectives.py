"""Ask ranks which collective they are in (their recorder thread: stacks/rank/recorder), beside
the stacks of the same hang report: here by signalling the process and reading its answer file,
on other hosts by the shell steps the snapshot's one script runs there (stacks/snapshot).

Only a process that catches ``COLLECTIVES_SIGNAL`` is asked: the default action of a real-time
signal ends a process, and a stranger with a reused pid, or an engine without the thread, must
not die of a hang report. Its answer is None ("no answer"), never an error.
"""
from __future__ import annotations

import os
import shlex
import time

from mlp_magic.core import proc_stat
from mlp_magic.machine.deadline import until
from mlp_magic.engine.side_signal import COLLECTIVES_SIGNAL
from mlp_magic.stacks.pure.recorded import parse_answer

MARK = "@@mlp_magic-collectives "
ASKS, AGAIN_AFTER_S = 3, 0.3   # a signal lost to faulthandler's re-entry guard is sent again


def ask(pid: int, path: str) -> bool:
    """Remove the old answer and signal ``pid`` when it catches the signal; whether it was asked."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        with open(f"/proc/{int(pid)}/status") as status:
            if not proc_stat.catches(status.read(), COLLECTIVES_SIGNAL):
                return False
        os.kill(pid, COLLECTIVES_SIGNAL)
        return True
    except OSError:
        return False


def gather(asked: dict, wait: float) -> dict:
    """{key: groups or None} for ``asked`` ({key: (pid, answer path)}) on this machine. A rank
    not answering soon is asked again: faulthandler skips a dump that starts while another of
    the process's is being written (its guard against re-entry), so a signal can be lost."""
    deadline = time.monotonic() + wait
    paths = {key: path for key, (pid, path) in asked.items() if ask(pid, path)}
    for _ in range(ASKS - 1):
        _wait_for(paths.values(), min(deadline, time.monotonic() + AGAIN_AFTER_S))
        for key in [key for key, path in paths.items() if not os.path.exists(path)]:
            ask(asked[key][0], paths[key])
    _wait_for(paths.values(), deadline)
    return {key: _read(paths[key]) if key in paths else None for key in asked}


def _wait_for(paths, deadline: float) -> None:
    """Until every file is there, or ``deadline``. No event says a file appeared:
    machine/deadline.until looks at a short steady pace."""
    paths = list(paths)
    until(lambda: all(os.path.exists(p) for p in paths), deadline, first_s=0.01, longest_s=0.05)


def _read(path: str) -> list | str | None:
    try:
        with open(path) as file:
            return parse_answer(file.read())
    except OSError:
        return None


def shell_ask(pid: int, path: str, flag: str, engine_program: str) -> str:
    """The remote steps of ``ask`` for one rank (sh: dash or bash): the flag variable is set
    when it was asked, so that the wait looks only for the answers that can come."""
    bit = COLLECTIVES_SIGNAL - 1
    quoted = shlex.quote(path)
    return (f"rm -f {quoted}; m=$(sed -n 's/^SigCgt:[[:space:]]*//p' /proc/{int(pid)}/status 2>/dev/null); "
            f"[ -n \"$m\" ] && [ $(( 0x$m >> {bit} & 1 )) = 1 ] && grep -qsF {engine_program} "
            f"/proc/{int(pid)}/cmdline && kill -{COLLECTIVES_SIGNAL} {int(pid)} 2>/dev/null && {flag}=1")


def shell_ready(path: str, flag: str) -> str:
    """A test that is true once the rank's answer is there, or when it was not asked."""
    return f"{{ [ -z \"${flag}\" ] || [ -e {shlex.quote(path)} ]; }}"


def shell_again(pid: int, path: str, flag: str) -> str:
    """Signal again a rank that was asked and has not answered (its signal may have been lost)."""
    return (f"{{ [ -z \"${flag}\" ] || [ -e {shlex.quote(path)} ] || "
            f"kill -{COLLECTIVES_SIGNAL} {int(pid)} 2>/dev/null; }}")


def shell_print(rank: int, path: str) -> str:
    return f"echo '{MARK}{int(rank)}'; cat {shlex.quote(path)} 2>/dev/null; echo"


def parse_printed(lines: list) -> list | str | None:
    """The lines after a rank's ``MARK`` line -> its answer (``parse_answer``), or None."""
    return parse_answer("\n".join(lines)) if any(line.strip() for line in lines) else None
