"""What runs in a rank: ipyparallel's engine made an MPI rank (engine/main), its cell hooks, its
host chores.

The engines' rule: an engine holds in ``sys.modules`` only what it keeps using. Python's pickle
finds an object's module by walking every module held there (``pickle.whichmodule``), so each
module held makes pickling slower in every cell (docs/performance.md). What serves once is
imported, run and dropped again with ``forget_modules``: the version check and the start slot
before the engine starts (engine/main), a host's chores on its first rank (``bootstrap.run_chore``:
the GPU agent's start, the GPU probe, log retention), the variables every rank sets for its
features (``bootstrap.ENVIRONMENT_CHORES``). What serves only
when asked loads then: the side signals' actions (``bootstrap.SIDE_ACTIONS``, engine/side_signal).
"""
from __future__ import annotations

import sys


def forget_modules(names) -> dict:
    """Modules out of ``sys.modules`` and off their package: {name: module} of those removed.
    Whatever holds one of them (a function, a thread) still works; a later import loads the
    module anew, unless ``restore_modules`` put it back first."""
    removed = {}
    for name in list(names):
        module = sys.modules.pop(name, None)
        if module is None:
            continue
        removed[name] = module
        package, _, attribute = name.rpartition(".")
        if getattr(sys.modules.get(package), attribute, None) is module:
            delattr(sys.modules[package], attribute)
    return removed


def used_once(function, *args):
    """``function(*args)``, whose own imports are forgotten again after it (the engines' rule):
    for what a rank needs once, or once in a while (a script's reading), and should not hold."""
    held = set(sys.modules)
    try:
        return function(*args)
    finally:
        forget_modules(set(sys.modules) - held)


def restore_modules(modules: dict) -> dict:
    """Put back what ``forget_modules`` removed, except a name imported anew meanwhile: the ones
    put back. Packages go first, so each module goes back onto its package as well."""
    restored = {name: module for name, module in modules.items() if name not in sys.modules}
    for name in sorted(restored, key=lambda name: name.count(".")):
        sys.modules[name] = restored[name]
        package, _, attribute = name.rpartition(".")
        if package in sys.modules:
            setattr(sys.modules[package], attribute, restored[name])
    return restored
