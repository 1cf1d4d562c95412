"""The lean engine's steps (engine/main): ipykernel's debugger without debugpy, ipyparallel's
serializer without numpy, and the contract with ipykernel and ipyparallel they rely on. Each
runs in a fresh interpreter: what a process has imported is the thing under test."""
from __future__ import annotations

import inspect
import re
import json
import subprocess
import sys
import textwrap

from mlp_magic.engine.ipykernel_private import DEBUGGER_FLAG, DEBUGGER_MODULE
from mlp_magic.engine.main import ENGINE_ARGS, keep_debugger_out


def fresh_python(code: str) -> dict:
    """Run ``code`` in a new interpreter; it prints one JSON object, returned here."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_ipykernel_still_reads_debugpy_through_the_flag_the_engine_sets():
    """The contract: ipykernel's kernel imports ``_is_debugpy_available`` from its debugger module
    (at its module's top up to 6.x, in ``IPythonKernel.__init__`` later) and builds no debugger
    when it is False. If this fails, ipykernel changed: look again."""
    import ipykernel.ipkernel

    source = inspect.getsource(ipykernel.ipkernel)
    assert re.search(rf"from \.debugger import [^\n]*\b{DEBUGGER_FLAG}\b", source), "the import moved"
    init = inspect.getsource(ipykernel.ipkernel.IPythonKernel.__init__)
    assert f"if {DEBUGGER_FLAG}:" in init
    assert DEBUGGER_MODULE == "ipykernel.debugger"


def test_the_debugger_module_loads_without_debugpy_and_a_cell_can_still_import_it():
    found = fresh_python("""
        import json, sys
        from mlp_magic.engine.main import keep_debugger_out
        kept = keep_debugger_out()
        import ipykernel.debugger
        loaded = sorted(n for n in sys.modules if n.startswith(("debugpy", "pydevd", "_pydevd")))
        import debugpy   # a debugging feature that asks for it gets it
        print(json.dumps({"kept": kept, "flag": ipykernel.debugger._is_debugpy_available,
                          "loaded": loaded, "later": debugpy.__name__}))
    """)
    assert found["kept"] is True and found["flag"] is False and found["loaded"] == []
    assert found["later"] == "debugpy"


def test_a_module_without_the_flag_is_left_to_be_imported_as_before(tmp_path, monkeypatch):
    # Stand-ins for a changed ipykernel: one reads the refusal but sets no flag, one lets it raise.
    (tmp_path / "no_flag_debugger.py").write_text(
        "try:\n    import lean_test_dependency\nexcept ImportError:\n    pass\n")
    (tmp_path / "raising_debugger.py").write_text("import lean_test_dependency\n")
    (tmp_path / "lean_test_dependency.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("no_flag_debugger", "raising_debugger"):
        finders = list(sys.meta_path)
        assert keep_debugger_out(name, "_flag", ("lean_test_dependency",)) is False
        assert name not in sys.modules and "lean_test_dependency" not in sys.modules
        assert sys.meta_path == finders          # the refusal is gone
    __import__("raising_debugger")                # imported later as it always was
    assert sys.modules["lean_test_dependency"].VALUE == 1
    for name in ("no_flag_debugger", "raising_debugger", "lean_test_dependency"):
        sys.modules.pop(name, None)


def test_too_late_or_wanted_already_changes_nothing(monkeypatch):
    monkeypatch.setitem(sys.modules, "lean_wanted_dependency", object())
    assert keep_debugger_out("json", "_flag", ("lean_wanted_dependency",)) is False


def test_replies_carry_no_numpy_until_a_cell_loads_it_then_arrays_are_zero_copy_again():
    found = fresh_python("""
        import json, sys
        from mlp_magic.engine.main import can_arrays_once_numpy_loads
        from ipyparallel.serialize import canning, serialize
        done = can_arrays_once_numpy_loads()
        serialize.serialize_object({"rank": 3, "f": len})     # a reply before any cell used numpy
        before = "numpy" in sys.modules
        import numpy
        array = numpy.arange(100_000, dtype="float64")
        buffers = serialize.serialize_object(array)
        back, _ = serialize.deserialize_object(buffers)
        print(json.dumps({"done": done, "before": before, "buffers": len(buffers),
                          "restored": numpy.ndarray in canning.can_map, "equal": bool((back == array).all()),
                          "again": can_arrays_once_numpy_loads()}))
    """)
    assert found["done"] is True and found["before"] is False
    assert found["restored"] and found["equal"]
    assert found["buffers"] == 2        # the array's memory travels as its own buffer, as before
    assert found["again"] is False      # numpy loaded: nothing left to defer


def test_the_serializer_contract():
    """ipyparallel's canning map names numpy's array by string, and serialize calls canning's
    ``can``: what ``can_arrays_once_numpy_loads`` relies on. It returns False (changing
    nothing) where either is gone."""
    from ipyparallel.serialize import canning, serialize

    assert "numpy.ndarray" in canning._original_can_map
    assert serialize.can is canning.can   # (this process never ran can_arrays_once_numpy_loads)


def test_the_history_database_is_off():
    assert "--HistoryManager.enabled=False" in ENGINE_ARGS


MPI_FIRST = """
    import json, os, sys
    import mpi4py
    if os.environ.get("TEST_RC_INITIALIZE") == "no":   # as a job's sitecustomize could
        mpi4py.rc.initialize = False
    from mlp_magic.engine.main import import_mpi_first
    first = import_mpi_first()
    place = list(sys.modules).index("mpi4py.MPI") if "mpi4py.MPI" in sys.modules else None
    from mpi4py import MPI
    before = MPI.Is_initialized()
    rc = (mpi4py.rc.initialize, mpi4py.rc.finalize)
    import ipyparallel.engine.app   # what comes after it in an engine
    from mlp_magic.engine.bootstrap import initialised_mpi
    initialised_mpi()
    print(json.dumps({"first": first, "place": place, "before": before, "after": MPI.Is_initialized(),
                      "thread": MPI.Is_initialized() and MPI.Query_thread() == MPI.THREAD_MULTIPLE,
                      "rc": list(rc)}))
"""


def launcher_env(**extra) -> dict:
    import os

    launcher = ("MLP_MAGIC_RANK", "OMPI_COMM_WORLD", "PMI")
    env = {k: v for k, v in os.environ.items() if not k.startswith(launcher)}
    return {**env, **extra}


def fresh_python_env(code: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_under_a_launcher_mpi_comes_first_and_bootstrap_initialises_it_as_mpi4py_would():
    found = fresh_python_env(MPI_FIRST, launcher_env(OMPI_COMM_WORLD_RANK="0"))
    assert found["first"] is True and found["place"] < 120 and found["before"] is False
    assert found["after"] is True and found["thread"] is True
    assert found["rc"] == [True, None]   # what the job set stays visible


def test_a_plain_engine_or_a_job_that_initialises_mpi_itself_is_left_alone():
    plain = fresh_python_env(MPI_FIRST, launcher_env(MLP_MAGIC_RANK="0", OMPI_COMM_WORLD_RANK="0"))
    assert plain["first"] is False and plain["place"] is None   # imported (and initialised) later
    own = fresh_python_env(MPI_FIRST, launcher_env(OMPI_COMM_WORLD_RANK="0", TEST_RC_INITIALIZE="no"))
    assert own["first"] is False and own["after"] is False      # the job's choice: no MPI_Init


def test_what_only_the_start_uses_is_not_kept():
    """The version check (with engine/pure/versions) and the start slots serve before the engine only:
    gone from ``sys.modules`` and from their packages after it, the slot still held; a later
    import loads them anew. Only ``home`` is read of the settings: the error types stay out."""
    found = fresh_python("""
        import json, os, sys, time
        import mlp_magic.engine.main as main
        name = "test-lean-%d-%d" % (os.getpid(), time.time_ns())   # a slot nobody else holds
        main.slot_names = lambda: [name]
        refused, slot = main.before_the_engine(0)
        import mlp_magic, mlp_magic.engine
        ours = sorted(name for name in sys.modules if name.startswith("mlp_magic"))
        attributes = [hasattr(mlp_magic.engine, "versions"), hasattr(mlp_magic.engine, "start_slots"),
                      hasattr(mlp_magic, "core")]
        from mlp_magic.engine.start_slots import slot_folder
        os.unlink(os.path.join(slot_folder(), name))
        print(json.dumps({"refused": refused, "slot": slot is not None, "ours": ours,
                          "attributes": attributes}))
    """)
    assert found["refused"] == "" and found["slot"] is True
    assert found["ours"] == ["mlp_magic", "mlp_magic.config", "mlp_magic.engine", "mlp_magic.engine.identity",
                             "mlp_magic.engine.ipykernel_private", "mlp_magic.engine.main"]
    assert found["attributes"] == [False, False, False]


CHORE_PACKAGE = {
    "__init__.py": "",
    "helper.py": "CALLS = []\n",
    "chore.py": ("from . import helper\nSTATE = {}\n\n"
                 "def work(value):\n    from . import later   # imported while it runs\n"
                 "    helper.CALLS.append(value)\n    STATE.setdefault('first', value)\n"
                 "    STATE.setdefault('later', later)\n"
                 "    return [STATE['first'], len(helper.CALLS), later.NAME, STATE['later'] is later]\n"),
    "later.py": "NAME = 'later'\n",
}


def test_a_chore_leaves_none_of_its_modules_but_meets_the_same_ones_each_run(tmp_path, monkeypatch):
    """engine/bootstrap.run_chore: what the chore's package loaded (at its import and while it
    ran) leaves sys.modules and its package; a later run finds the same module state and the same
    lazily imported modules (not a second copy: an ``except`` would miss the copy's error class);
    what was held before the chore stays held."""
    from mlp_magic.engine.bootstrap import _CHORES, run_chore

    package = tmp_path / "chore_pkg"
    package.mkdir()
    for name, text in CHORE_PACKAGE.items():
        (package / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    import chore_pkg.helper   # held before the chore: it stays

    try:
        assert run_chore("chore_pkg.chore:work", "a") == ["a", 1, "later", True]
        assert "chore_pkg.chore" not in sys.modules and "chore_pkg.later" not in sys.modules
        assert not {"chore", "later"} & set(vars(sys.modules["chore_pkg"]))
        assert sys.modules["chore_pkg.helper"] is chore_pkg.helper
        assert run_chore("chore_pkg.chore:work", "b") == ["a", 2, "later", True]   # the same modules
        assert "chore_pkg.chore" not in sys.modules and "chore_pkg.later" not in sys.modules
        import chore_pkg.later as fresh   # an import of its own, outside the chore: a new copy
        assert run_chore("chore_pkg.chore:work", "c")[3] is False and sys.modules["chore_pkg.later"] is fresh
    finally:
        _CHORES.pop("chore_pkg.chore:work", None)
        for name in [n for n in sys.modules if n == "chore_pkg" or n.startswith("chore_pkg.")]:
            del sys.modules[name]


def test_a_top_level_chore_module_goes_too(tmp_path, monkeypatch):
    from mlp_magic.engine.bootstrap import _CHORES, run_chore

    (tmp_path / "lone_chore.py").write_text("def work():\n    return 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert run_chore("lone_chore:work") == 7 and "lone_chore" not in sys.modules
    finally:
        _CHORES.pop("lone_chore:work", None)
        sys.modules.pop("lone_chore", None)


def test_every_chore_and_side_action_names_a_function_that_exists():
    from mlp_magic.engine import bootstrap

    targets = [bootstrap.RETENTION_CHORE, bootstrap.AGENT_CHORE, bootstrap.GPU_PROBE_CHORE,
               *bootstrap.ENVIRONMENT_CHORES, *(action for _, action, _ in bootstrap.SIDE_ACTIONS)]
    for target in targets:
        module, _, name = target.partition(":")
        assert callable(getattr(__import__(module, fromlist=[name]), name)), target


def test_a_ranks_variables_are_set_and_their_features_modules_not_kept():
    """bootstrap's every-rank chores: torch's recorder sized, NCCL's watchdog off; unblock/ and
    stacks/ (what answers the side signals) are not held afterwards, nor is ``errors``."""
    found = fresh_python("""
        import json, os, sys
        for name in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE",
                     "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ENABLE_MONITORING"):
            os.environ.pop(name, None)
        from mlp_magic.engine import bootstrap
        before = sorted(name for name in sys.modules if name.startswith("mlp_magic"))
        for chore in bootstrap.ENVIRONMENT_CHORES:
            bootstrap.run_chore(chore)
        after = sorted(name for name in sys.modules if name.startswith("mlp_magic"))
        print(json.dumps({"before": before, "after": after, "set": [os.environ.get(name) for name in (
            "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ENABLE_MONITORING")]}))
    """)
    assert found["set"] == ["2000", "0", "0"]
    assert found["after"] == found["before"]
    assert not [name for name in found["after"]
                if name.startswith(("mlp_magic.unblock", "mlp_magic.stacks", "mlp_magic.errors"))]
