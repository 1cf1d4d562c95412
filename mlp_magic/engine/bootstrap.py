"""Make a fresh engine a rank: its variables, its names, sys.argv, MPI, the cell hooks, stack
dumps, the unblock thread, SIGINT only inside cells, ``sys.exit(0)`` a success.

Runs in each engine, before any user code, once per World start (the kernel sends
``bootstrap`` to every engine at once).
"""
from __future__ import annotations

import faulthandler
import importlib
import os
import signal
import sys

from mlp_magic.engine import forget_modules, restore_modules
from mlp_magic.engine.capture import install_capture, own_log_root
from mlp_magic.engine.exits import install_exit_status
from mlp_magic.engine.identity import stacks_path
from mlp_magic.debugging.rank import breakpoints
from mlp_magic.engine.side_signal import COLLECTIVES_SIGNAL, PROGRESS_SIGNAL, UNBLOCK_SIGNAL, on_signal
from mlp_magic.engine.sigint import install_sigint_gate

_stacks_file: list = []   # the open file faulthandler writes to (kept for the engine's life)
# Post-mortem's part in every rank: a ``post_run_cell`` hook keeps the exception of a cell that
# raised (its traceback holds the frames, alive) and forgets it when a later cell succeeds; cells
# that begin with ``INSPECT_TAG`` change nothing. The inspection (debugging/rank/postmortem, with
# debugging/pure/postmortem) loads only where a failure is inspected.
GENERATED_TAG = "# mlp_magic generated: "   # the first line of a cell the kernel wrote
INSPECT_TAG = GENERATED_TAG + "inspect"
_STATE: dict = {}        # "failure": the last cell's exception; "hook": the registered callback; "shell"


def install_failure_hook(shell) -> None:
    """Keep each cell's failure from now on (again at a re-bootstrap: replaced, never stacked)."""
    if "hook" in _STATE:
        shell.events.unregister("post_run_cell", _STATE["hook"])
    _STATE["hook"], _STATE["shell"] = keep_failure_of, shell
    shell.events.register("post_run_cell", keep_failure_of)


def last_failure() -> BaseException | None:
    """The exception of this rank's last cell that raised, while no later cell succeeded."""
    return _STATE.get("failure")


def keep_failure_of(result) -> None:
    """The ``post_run_cell`` hook: keep a raising cell's exception, forget it after a success."""
    info = getattr(result, "info", None)
    if (getattr(info, "raw_cell", "") or "").startswith(INSPECT_TAG):
        return
    if result.error_in_exec is not None:
        _STATE["failure"] = result.error_in_exec
    elif result.error_before_exec is None:
        _STATE.pop("failure", None)   # a cell that succeeded: its frames are no longer interesting
        _forget_last_failure()


def _forget_last_failure() -> None:
    """Let the failed cell's frames go (a CUDA out-of-memory's tensors among them): Python and
    IPython keep the last exception too, which a local notebook only drops at the next error."""
    sys.last_type = sys.last_value = sys.last_traceback = None
    if hasattr(sys, "last_exc"):   # Python 3.12 on
        sys.last_exc = None
    formatter = getattr(_STATE.get("shell"), "InteractiveTB", None)
    if getattr(formatter, "tb", None) is not None:
        formatter.tb = None


def engine_shell():
    """The IPython shell of the engine this runs in, as ipyparallel made it (ipykernel's
    singleton kernel): its namespace is the rank's, its events carry the cell hooks."""
    from ipykernel.kernelbase import Kernel

    return Kernel.instance().shell


def running_engine_shell():
    """``engine_shell()`` where this process is an engine, else None (none is made)."""
    from ipykernel.kernelbase import Kernel

    return Kernel.instance().shell if Kernel.initialized() else None


# A host's chores, run by its first rank (``run_chore``): "module:function".
RETENTION_CHORE = "mlp_magic.output.rank.retention:prune_in_background"
AGENT_CHORE = "mlp_magic.agent.rank.start:start_agent"
GPU_PROBE_CHORE = "mlp_magic.gpu.probe:probe_on_engine"
# Every rank's chores: the variables a feature needs set before any cell. Its modules load
# again only where the feature is used.
ENVIRONMENT_CHORES = (
    "mlp_magic.stacks.rank.recorder:turn_on",   # torch's flight recorder, read at the first group
    # NCCL's watchdog must not end a rank that --unblock can free
    "mlp_magic.unblock.rank.side:prepare_environment",
)
_CHORES: dict = {}   # "module:function" -> (the function, {name: module} of what its runs loaded)
# What a side thread does at each signal (engine/side_signal): imported when the signal first
# comes, so that a rank holds none of it until then.
SIDE_ACTIONS = (
    # %mpirun --unblock: end a hung collective, the process stays
    (UNBLOCK_SIGNAL, "mlp_magic.unblock.rank.side:unblock", "mlp-unblock"),
    # the panel's Unblock: an idle rank drives MPI's progress
    (PROGRESS_SIGNAL, "mlp_magic.unblock.rank.mpi_world:progress_beside_main_thread", "mlp-progress"),
    # the hang report's collectives: which one each rank is in
    (COLLECTIVES_SIGNAL, "mlp_magic.stacks.rank.recorder:answer", "mlp-collectives"),
)


def run_chore(target: str, *args):
    """``function(*args)`` of ``target`` ("module:function"); then every module of its top-level
    package that appeared meanwhile (whichever thread imported it) leaves ``sys.modules`` (the
    engines' rule: engine/__init__). They are kept here with the function and put back for the
    length of each later run, so the chore always meets the same modules: its state (the agent
    it started), its classes (an ``except`` names the error its lazy imports raise), and nothing
    executed twice. A thread it left running (retention) keeps what it uses."""
    function, held = _CHORES.get(target, (None, {}))
    back = restore_modules(held)
    before = set(sys.modules) - set(back)
    module, _, name = target.partition(":")
    try:
        if function is None:
            function = getattr(importlib.import_module(module), name)
        return function(*args)
    finally:
        top = module.partition(".")[0]
        dropped = forget_modules(n for n in set(sys.modules) - before if n.partition(".")[0] == top)
        if function is not None:
            _CHORES[target] = (function, {**held, **dropped})


def bootstrap(variables: dict, names: dict, init_mpi: bool, display_cap: int,
              log_retention: tuple | None = None) -> dict:
    """Set the torch/MPI variables, the user-facing names, MPI and the cell hooks; on each
    host's first rank, remove old cell logs (``log_retention``: the log root and days to keep,
    also applied to the fallback root of ``capture.open_rank_log``)."""
    if log_retention and int(variables["LOCAL_RANK"]) == 0:   # once per host
        root, days = log_retention
        run_chore(RETENTION_CHORE, [root, own_log_root()], days)
    os.environ.update({key: str(value) for key, value in variables.items()})
    for chore in ENVIRONMENT_CHORES:
        run_chore(chore)
    # As `python -c` under mpiexec: argparse in a cell then sees no arguments, not the engine's
    # own command line (its connection file, its options).
    sys.argv = ["-c"]
    shell = engine_shell()
    shell.user_ns.update(names, input=no_stdin_input)
    if init_mpi:
        # Initialise here, on every rank together: a later `from mpi4py import MPI` inside
        # `if rank == 0:` would otherwise hang waiting for ranks that never call MPI_Init.
        MPI = initialised_mpi()
        shell.user_ns.setdefault("MPI", MPI)
        shell.user_ns.setdefault("comm", MPI.COMM_WORLD)
    install_sigint_gate(shell)   # first: the capture's post hook then runs disarmed too
    install_exit_status(shell)   # before the hooks that look at a cell's failure
    install_capture(shell, int(variables["RANK"]), display_cap)
    # debugging/rank/postmortem, which reads it, loads when a failure is inspected
    install_failure_hook(shell)
    breakpoints.install(shell)   # breakpoint() stops the rank; pdb's commands come on the control channel
    _register_stack_dump()
    for signum, action, name in SIDE_ACTIONS:
        on_signal(signum, action, name)
    return {"rank": int(variables["RANK"]), "pid": os.getpid()}


def no_stdin_input(prompt: object = "") -> str:
    """``input()`` in a cell, as under mpiexec, whose ranks read an empty stdin: EOFError, with
    the user's line and not ipykernel's frames (a rank has no stdin to forward)."""
    __tracebackhide__ = True  # noqa: F841 - IPython's traceback leaves this frame out
    print(prompt, end="", flush=True)
    raise EOFError("EOF when reading a line: a rank has no stdin (%mpirun --push NAME sends it a value)")


def initialised_mpi():
    """mpi4py's MPI, initialised as its import would have done: engine/main imported it first
    without MPI_Init (its place in ``sys.modules`` makes pickling its handles cheap)."""
    import mpi4py
    from mpi4py import MPI

    rc = mpi4py.rc
    if not MPI.Is_initialized() and rc.initialize in (True, "yes"):
        if rc.threads in (False, "no"):
            MPI.Init()
        else:
            MPI.Init_thread(getattr(MPI, f"THREAD_{str(rc.thread_level).upper()}", MPI.THREAD_MULTIPLE))
    return MPI


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
