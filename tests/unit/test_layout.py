"""The layout's rules (ARCHITECTURE.md), read from the modules' own source: imports and sizes.

Every import counts, a lazy one inside a function too: it runs on some path.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mlp_magic"
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}
UI_LIBRARIES = ("IPython", "ipywidgets", "tornado", "jupyter_server")
LEAVES = ("mlp_magic.errors", "mlp_magic.config")   # import the standard library only (and errors)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(folder: str = "") -> dict:
    """{dotted name: path} of every module under mlp_magic/<folder>."""
    root = PACKAGE / folder
    return {module_name(path): path for path in sorted(root.rglob("*.py"))}


def imports_of(path: Path) -> set:
    """The absolute names of every module ``path`` imports, relative imports resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            # "from . import x" imports the module x when x is one
            found.update(f"{base}.{alias.name}" for alias in node.names
                         if f"{base}.{alias.name}" in ALL_MODULES)
    ancestors = {".".join(name.split(".")[:n]) for n in range(1, name.count(".") + 1)}
    return found - ancestors   # a module's own packages are always imported before it


ALL_MODULES = modules()


def top(name: str) -> str:
    return name.split(".")[0]


def ours(name: str) -> bool:
    return top(name) == "mlp_magic"


def violations(folder: str, allowed) -> list:
    """[(module, import)] for the imports of mlp_magic/<folder> that ``allowed(import)`` refuses."""
    return [(name, imported) for name, path in modules(folder).items()
            for imported in sorted(imports_of(path)) if not allowed(imported)]


def test_the_checker_sees_relative_lazy_and_module_imports():
    found = imports_of(PACKAGE / "world" / "world.py")
    assert {"mlp_magic.config", "mlp_magic.engine.bootstrap", "mlp_magic.world.published",
            "mlp_magic.world.gpus", "ipyparallel"} <= found   # the last two are lazy imports


def test_core_imports_the_standard_library_core_and_errors_only():
    def allowed(name):
        return top(name) in STDLIB or name == "mlp_magic.errors" or name.startswith("mlp_magic.core")
    assert violations("core", allowed) == []


def test_the_engine_imports_nothing_of_ours_outside_core():
    """Code running inside each rank; ``errors`` and ``config`` are leaves (standard library only)."""
    def allowed(name):
        return not ours(name) or name.startswith(("mlp_magic.core", "mlp_magic.engine")) or name in LEAVES
    assert violations("engine", allowed) == []


def test_errors_and_config_are_leaves():
    for name in LEAVES:
        imported = imports_of(ALL_MODULES[name])
        assert all(top(i) in STDLIB or i == "mlp_magic.errors" for i in imported), (name, imported)


@pytest.mark.parametrize("folder", ["core", "engine", "fanout/ssh"])
def test_no_ui_library_below_the_surface(folder):
    assert violations(folder, lambda name: top(name) not in UI_LIBRARIES) == []


# Bottom to top; a module imports from its own layer or below, never above.
LAYERS = (
    ("mlp_magic.errors", "mlp_magic.config"),           # leaves
    ("mlp_magic.core",),                                # pure
    ("mlp_magic.engine",),                              # runs inside each rank
    ("mlp_magic.fanout.ssh", "mlp_magic.gpu", "mlp_magic.stacks", "mlp_magic.agent"),  # transports, probes
    ("mlp_magic.world",),                               # %%mpirun
    ("mlp_magic.fanout",),                              # allrun
    ("mlp_magic.cluster",),                             # the cluster picture
    ("mlp_magic.server",),                              # the lab panel's server side
    ("mlp_magic",),                                     # entry points: magics, cli, demo, helpers
)


def layer(name: str) -> int:
    """The layer of the longest prefix that names it (fanout.ssh, not fanout)."""
    matches = [(len(prefix), index) for index, prefixes in enumerate(LAYERS) for prefix in prefixes
               if name == prefix or name.startswith(prefix + ".")]
    return max(matches)[1]


def test_every_import_goes_down_the_layers():
    upward = [(name, imported) for name, path in ALL_MODULES.items() for imported in sorted(imports_of(path))
              if ours(imported) and imported != "mlp_magic" and layer(imported) > layer(name)]
    assert upward == []


def test_sizes():
    """No module over 400 lines, no function over 50, no __init__ over 8 parameters."""
    too_big = []
    for name, path in ALL_MODULES.items():
        source = path.read_text()
        if source.count("\n") > 400:
            too_big.append(f"{name}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno - node.lineno + 1 > 50:
                    too_big.append(f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
                parameters = len(node.args.args) + len(node.args.kwonlyargs) - 1
                if node.name == "__init__" and parameters > 8:
                    too_big.append(f"{name}.__init__: {parameters} parameters")
    assert too_big == []


# --------------------------------------------------------------- allrun's start-up stays lean

# What the allrun command had loaded at these two points before the restructure (measured then, less
# what that probe itself loaded: json): no other module outside ours may appear, and our code only
# in these files. A new module on this path must be a decision, made here.
STDLIB_AT_IMPORT = {
    "__future__", "__main__", "_abc", "_codecs", "_collections", "_collections_abc", "_distutils_hack",
    "_frozen_importlib", "_frozen_importlib_external", "_functools", "_imp", "_io", "_operator",
    "_signal", "_sitebuiltins", "_sre", "_stat", "_thread", "_warnings", "_weakref", "abc", "builtins",
    "codecs", "collections", "copyreg", "encodings", "encodings.aliases", "encodings.utf_8", "enum",
    "functools", "genericpath", "io", "itertools", "keyword", "marshal", "operator", "os", "os.path",
    "posix", "posixpath", "re", "re._casefix", "re._compiler", "re._constants", "re._parser",
    "reprlib", "signal", "site", "stat", "sys", "time", "types", "zipimport",
}
STDLIB_AT_START = STDLIB_AT_IMPORT | {"collections.abc", "errno", "math", "resource", "shlex"}
OURS_AT_IMPORT = {"mlp_magic", "mlp_magic.errors", "mlp_magic.fanout", "mlp_magic.fanout.command",
                  "mlp_magic.fanout.ssh", "mlp_magic.fanout.ssh.interrupts"}
OURS_AT_START = OURS_AT_IMPORT | {
    "mlp_magic.config", "mlp_magic.core", "mlp_magic.core.host_command", "mlp_magic.core.hostfile",
    "mlp_magic.core.local_names",
    "mlp_magic.core.ranges", "mlp_magic.core.records", "mlp_magic.core.results",
    "mlp_magic.core.topology", "mlp_magic.fanout.options", "mlp_magic.fanout.plan",
    "mlp_magic.fanout.ssh", "mlp_magic.fanout.ssh.argv", "mlp_magic.fanout.ssh.spawn",
}
AT_START = r"""
import os, sys
from mlp_magic.fanout.ssh import spawn
def report(launch):   # where the first host's ssh would start: stop here
    print(*sorted(sys.modules)); sys.stdout.flush(); os._exit(0)
spawn.Launch.start_all = report
from mlp_magic.fanout import command
command.main(["--json", "--", "true"])
"""
AT_IMPORT = "import sys\nimport mlp_magic.fanout.command\nprint(*sorted(sys.modules))"


def loaded(program: str) -> set:
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(PACKAGE.parent)))
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


@pytest.mark.parametrize("program, stdlib, ours_expected", [
    (AT_IMPORT, STDLIB_AT_IMPORT, OURS_AT_IMPORT), (AT_START, STDLIB_AT_START, OURS_AT_START)],
    ids=["import", "first-ssh"])
def test_allrun_start_up_imports_no_more_than_before(program, stdlib, ours_expected):
    modules_now = loaded(program)
    assert {m for m in modules_now if not ours(m)} - stdlib == set()
    assert {m for m in modules_now if ours(m)} == ours_expected


STACKS_AT_START = r"""
import os, sys
from mlp_magic.fanout.ssh import spawn
def report(launch):   # where the first host's ssh would start: stop here
    print(*sorted(sys.modules)); sys.stdout.flush(); os._exit(0)
spawn.Launch.start_all = report
from mlp_magic import cli
cli.main(["stacks", "-H", "mlpt-nohost-a,mlpt-nohost-b"])
"""


def test_stacks_starts_its_ssh_before_the_merging_and_rendering_are_loaded():
    """They are a third of the command's imports: they load while the handshakes run."""
    modules_now = loaded(STACKS_AT_START)
    assert "mlp_magic.stacks.collect" in modules_now
    later = {"mlp_magic.core.stack_jobs", "mlp_magic.core.stack_report", "mlp_magic.core.render_stacks",
             "mlp_magic.core.stack_tree", "dataclasses", "asyncio", "ssl"}
    assert modules_now & later == set()
