"""The program every rank runs: ipyparallel's engine, registered under the rank's own number.

Engine id = launcher rank makes a start readable before any engine has run a line of ours (which
ranks are in, which are missing, on which hosts), and each log line carries the rank, so a failed
start can quote the missing ranks' own lines out of the launcher's shared log.

A rank's start is CPU-bound; ranks that outnumber a host's cores thrash if they start at once, so
at most one rank per core goes through it at a time (engine/start_slots: a per-core flock).

A lean engine: every module it holds costs memory, and time wherever Python walks
``sys.modules`` (pickle's ``whichmodule``, for mpi4py's handles). ipykernel's debugger (debugpy
and pydevd: no debugpy stream can reach it on an engine), numpy (ipyparallel's serializer would
import it at the first reply) and sqlite3 (IPython's history) load only when something asks.
Each step checks the private name it relies on and, where it is gone, leaves the engine as
ipykernel and ipyparallel made it (tests/unit/engine/test_lean_engine.py); the figures are in
benchmarks/engine_weight.py and docs/performance.md.
"""
from __future__ import annotations

import os
import sys
import time

from mlp_magic.engine import forget_modules
from mlp_magic.engine.identity import STARTED, launched_by_mpi, launcher_rank, respawned, usable_cpus
from mlp_magic.engine.ipykernel_private import DEBUGGER_FLAG, DEBUGGER_MODULE, run_every_cell

LOG_FORMAT = "%(asctime)s.%(msecs).03d [rank {rank}] [%(name)s]%(highlevel)s %(message)s"


# IPython's history database: ipyparallel already points it at ":memory:"; off, sqlite3 stays out.
# In, Out, _i<N> and %history of this session are kept in memory either way.
ENGINE_ARGS = ("--HistoryManager.enabled=False",)
REFUSED = ("debugpy",)   # what the debugger module may not import


class _Refuse:
    """A meta path finder that says ``names`` (and their submodules) are not installed."""

    def __init__(self, names: tuple):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (kept out of the engine)", name=name)
        return None


def keep_debugger_out(module: str = DEBUGGER_MODULE, flag: str = DEBUGGER_FLAG,
                      refused: tuple = REFUSED) -> bool:
    """Import ``module`` with ``refused`` unreachable, before the kernel imports it; True when the
    module then says, through ``flag``, that it runs without them. Otherwise (the module gone or
    changed, or it did not take the refusal as "unavailable") nothing of it stays imported, and
    the kernel imports it later as it always did."""
    if module in sys.modules or any(name in sys.modules for name in refused):
        return False   # too late, or someone wanted it: leave it as it is
    before = set(sys.modules)
    refusal = _Refuse(refused)
    sys.meta_path.insert(0, refusal)
    try:
        __import__(module)
        kept_out = getattr(sys.modules[module], flag, None) is False
    except Exception:
        kept_out = False
    finally:
        sys.meta_path.remove(refusal)
    if not kept_out:
        for name in set(sys.modules) - before:
            del sys.modules[name]
    return kept_out


def can_arrays_once_numpy_loads() -> bool:
    """ipyparallel's serializer without its numpy import: the array entry of its canning map
    waits until numpy is loaded, then goes back in, as the class it names. True when done."""
    from ipyparallel.serialize import canning, serialize

    key = "numpy.ndarray"
    if "numpy" in sys.modules or key not in canning.can_map or serialize.can is not canning.can:
        return False
    pending, original = [canning.can_map.pop(key)], canning.can

    def can(obj):
        if pending and "numpy" in sys.modules:
            ndarray = getattr(sys.modules["numpy"], "ndarray", None)
            if isinstance(ndarray, type):   # else numpy is half-imported: this thread is inside it
                for canner in pending[:1]:   # a copy: another thread may have emptied it
                    canning.can_map[ndarray] = canner
                pending.clear()
        return original(obj)

    canning.can = serialize.can = can
    return True


def engine_argv(argv: list, rank: int | None) -> list:
    """ipyparallel's engine arguments and the lean engine's settings (``ENGINE_ARGS``), plus
    the rank's id and log tag when it has a rank."""
    if rank is None:
        return [*argv, *ENGINE_ARGS]
    return [*argv, *ENGINE_ARGS, f"--IPEngine.id={rank}",
            f"--IPEngine.log_format={LOG_FORMAT.format(rank=rank)}"]


def import_mpi_first() -> bool:
    """mpi4py's MPI module before ipyparallel and ipykernel, without MPI_Init (bootstrap calls it on
    every rank together, as mpi4py would have at import). True when imported so.

    pickle finds a predefined mpi4py handle (``MPI.DOUBLE``, ``MPI.SUM``: no ``__module__``) by
    trying every module in ``sys.modules``' order (``pickle.whichmodule``), so one pickle costs
    in proportion to ``mpi4py.MPI``'s place in that order: 520th after an engine's imports, 73rd
    under plain mpiexec, 0.58 against 0.10 ms. Only under an MPI launcher (a plain engine never
    initialises MPI), and only where the job lets mpi4py initialise MPI (``mpi4py.rc``); a failed
    import is left to bootstrap, which imports it again and says why it fails."""
    if not launched_by_mpi() or "mpi4py.MPI" in sys.modules:
        return False
    try:
        import mpi4py
    except Exception:
        return False
    rc = mpi4py.rc
    wanted = (rc.initialize, rc.finalize)
    if wanted[0] not in (True, "yes"):
        return False
    # finalize None means "as initialize": keep MPI_Finalize at exit, as with the default
    rc.initialize, rc.finalize = False, (True if wanted[1] is None else wanted[1])
    try:
        from mpi4py import MPI  # noqa: F401
    except Exception:
        return False
    finally:
        rc.initialize, rc.finalize = wanted   # read at import: what the job set stays visible
    return True


def init_mpi_now() -> None:
    """A respawned rank (``%mpirun --respawn``) initialises MPI at once, before its engine starts:
    the live ranks wait in MPI_Comm_spawn until it does, and Open MPI's daemon on another host
    is lost when a spawned process takes seconds to (measured with Open MPI 5.0.11: every time
    with a 3 s delay, never without). A failure is left to bootstrap, which says why."""
    try:
        from mlp_magic.engine.bootstrap import initialised_mpi

        initialised_mpi()
    except Exception:  # noqa: BLE001 - bootstrap initialises again and names the cause
        pass


def slot_names() -> list:
    """One slot per CPU this rank may run on: ranks bound to distinct cores never wait for each
    other, ranks sharing the machine's CPUs share their slots."""
    return [f"cpu{cpu}" for cpu in usable_cpus()]


def no_prompt_here() -> None:
    """A rank is a job mpiexec started, with nobody at a prompt. IPython sets ``sys.ps1`` so that a
    script can tell it runs interactively, and never reads it itself; a library that asks gets a
    job's answer here, as in any script mpiexec starts (Lightning's DDP refuses to run "in an
    interactive environment", where its launcher would not even start a process)."""
    for name in ("ps1", "ps2", "ps3"):
        if hasattr(sys, name):
            delattr(sys, name)


def before_the_engine(rank: int | None) -> tuple:
    """(why this Python cannot run an engine, or "", the start slot taken or None). The modules
    of ours that this imports (the version check with engine/pure/versions, the start slots) serve
    here only: they are dropped from ``sys.modules`` after it, and their objects freed. The
    engine holds what it uses (see the top: pickle walks every module it holds), and a later
    import, if one ever comes, loads them anew."""
    before = set(sys.modules)
    try:
        from mlp_magic.engine.versions import refusal

        refused = refusal(rank)   # this Python cannot run an engine (engine/pure/versions)
        if refused:
            return refused, None
        from mlp_magic.engine.start_slots import take_start_slot, wait_limit

        return "", take_start_slot(rank, slot_names(), wait_s=wait_limit())
    finally:
        forget_modules(name for name in set(sys.modules) - before if name.startswith("mlp_magic."))


def main() -> None:
    rank = launcher_rank()
    refused, slot = before_the_engine(rank)
    if refused:   # one line, exit
        print(refused, file=sys.stderr, flush=True)
        sys.exit(3)
    sys.argv = [sys.argv[0], *engine_argv(sys.argv[1:], rank)]
    # ipykernel leaves fd 1/2 unwatched where PYTEST_CURRENT_TEST is set: an engine started from
    # a test (or a notebook cell under pytest) would then lose C-level output. An engine is one.
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    STARTED["mpi_first"] = import_mpi_first()   # before anything else of size: see there
    if respawned():
        init_mpi_now()
    STARTED["debugger_kept_out"] = keep_debugger_out()
    from ipyparallel.engine.app import IPEngine

    from mlp_magic.engine.quiet import quieten

    STARTED["numpy_deferred"] = can_arrays_once_numpy_loads()

    class RankEngine(IPEngine):
        async def register(self):
            try:
                await super().register()   # the reply, the shell, the first heartbeat
            finally:
                if slot is not None:
                    slot.close()
                times = os.times()
                STARTED.update(registered_at=time.time(), cpu_s=round(times.user + times.system, 3))
            quieten(self.kernel)
            run_every_cell(self.kernel)
            no_prompt_here()   # the shell has just set it

    RankEngine.launch_instance()


if __name__ == "__main__":
    main()
