"""``sys.exit()`` in a cell, as under ``mpiexec python -c``: status 0 (or none) ends the cell
well, without a word; another status is the rank's failure, shown in one line
(``SystemExit: 2``; a message given instead of a status goes to stderr, as Python prints it).

IPython treats every SystemExit in a cell as an error: it shows "SystemExit: 0" and a warning
("To exit: use 'exit', 'quit', or Ctrl-D.", meant for a terminal), and the reply says error, so a
pasted script ending in ``sys.exit(main())`` failed on every rank. The rank itself goes on in any
case (it is persistent); the code after the exit is not run, as in Python.
"""
from __future__ import annotations

import functools
import sys
import warnings

_INSTALLED = "_mlp_exit_status"


def ends_well(error: BaseException | None) -> bool:
    """A SystemExit whose status is a success (0 or none), as Python's own exit reads it."""
    return isinstance(error, SystemExit) and error.code in (None, 0)


def install_exit_status(shell) -> None:
    """From now on, a cell that calls ``sys.exit(0)`` succeeds (idempotent). Register before the
    other post_run_cell hooks: they then see the cell as having succeeded."""
    if getattr(shell, _INSTALLED, False):
        return
    show = shell.showtraceback

    @functools.wraps(show)
    def showtraceback(*args, **kwargs):
        error = sys.exc_info()[1]
        if ends_well(error):
            return None   # Python says nothing when a program exits with status 0
        if isinstance(error, SystemExit):   # one line, not IPython's "An exception has occurred..."
            if not isinstance(error.code, int):
                print(error.code, file=sys.stderr)   # sys.exit("message"): Python prints it, status 1
            kwargs["exception_only"] = False
            error._render_traceback_ = functools.partial(_one_line, error)
        return show(*args, **kwargs)

    shell.showtraceback = showtraceback
    shell.events.register("post_run_cell", _succeeded_if_it_ended_well)
    warnings.filterwarnings("ignore", message="To exit: use 'exit', 'quit', or Ctrl-D.")
    setattr(shell, _INSTALLED, True)


def _succeeded_if_it_ended_well(result) -> None:
    if result is not None and ends_well(result.error_in_exec):
        result.error_in_exec = None   # the reply then says ok


def _one_line(error: SystemExit) -> list:
    """``sys.exit(2)`` as Python ends: its status (a message given instead: status 1)."""
    return [f"SystemExit: {error.code if isinstance(error.code, int) else 1}"]
