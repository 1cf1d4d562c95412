"""Make a fresh engine a rank: its variables, its names, sys.argv, MPI, the cell hooks, stack
dumps, SIGINT only inside cells, ``sys.exit(0)`` a success.

Runs in each engine, before any user code, once per World start (the kernel sends
``bootstrap`` to every engine at once).
"""
from __future__ import annotations

import faulthandler
import os
import signal
import sys

from . import postmortem
from .capture import install_capture, own_log_root
from .exits import install_exit_status
from .identity import stacks_path
from .retention import prune_in_background
from .sigint import install_sigint_gate

_stacks_file: list = []   # the open file faulthandler writes to (kept for the engine's life)


def engine_shell():
    """The IPython shell of the engine this runs in, as ipyparallel made it (ipykernel's
    singleton kernel): its namespace is the rank's, its events carry the cell hooks."""
    from ipykernel.kernelbase import Kernel

    return Kernel.instance().shell


def bootstrap(variables: dict, names: dict, init_mpi: bool, display_cap: int,
              log_retention: tuple | None = None) -> dict:
    """Set the torch/MPI variables, the user-facing names, MPI and the cell hooks; on each
    host's first rank, remove old cell logs (``log_retention``: the log root and days to keep,
    also applied to the fallback root of ``capture.open_rank_log``)."""
    if log_retention and int(variables["LOCAL_RANK"]) == 0:
        root, days = log_retention
        prune_in_background([root, own_log_root()], days)
    os.environ.update({key: str(value) for key, value in variables.items()})
    # As `python -c` under mpiexec: argparse in a cell then sees no arguments, not the engine's
    # own command line (its connection file, its options).
    sys.argv = ["-c"]
    shell = engine_shell()
    shell.user_ns.update(names)
    if init_mpi:
        # Initialise here, on every rank together: a later `from mpi4py import MPI` inside
        # `if rank == 0:` would otherwise hang waiting for ranks that never call MPI_Init.
        from mpi4py import MPI

        shell.user_ns.setdefault("MPI", MPI)
        shell.user_ns.setdefault("comm", MPI.COMM_WORLD)
    install_sigint_gate(shell)   # first: the capture's post hook then runs disarmed too
    install_exit_status(shell)   # before the hooks that look at a cell's failure
    install_capture(shell, int(variables["RANK"]), display_cap)
    postmortem.install(shell)
    _register_stack_dump()
    return {"rank": int(variables["RANK"]), "pid": os.getpid()}


def _register_stack_dump() -> None:
    """SIGUSR1 writes every thread's stack to a file, even while blocked inside a C call."""
    if _stacks_file:
        return
    path = stacks_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # Append mode: the client truncates the file before asking for a dump, and the dump then
    # starts at offset 0 (a plain "w" handle would keep writing at its old offset).
    _stacks_file.append(open(path, "a"))
    faulthandler.register(signal.SIGUSR1, file=_stacks_file[0], all_threads=True, chain=False)
