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
LEAVES = ("mlp_magic.errors", "mlp_magic.config", "mlp_magic.location")   # the standard library only


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
            "mlp_magic.client.connect", "mlp_magic.gpu.engines"} <= found   # the last is a lazy import


# ------------------------------------------------------------------------------ the sides
# A module's side comes from its folder: ``core/`` and every ``pure/`` folder are pure (values in,
# values out: the standard library only); ``machine/`` asks this machine (names, processes, files,
# the clock) for the others; ``engine/`` and every ``rank/`` folder run inside the ranks;
# everything else is the kernel's (or a command's) side.
def is_pure(name: str) -> bool:
    parts = name.split(".")
    return parts[1:2] == ["core"] or "pure" in parts[1:]


def asks_the_machine(name: str) -> bool:
    return name.split(".")[1:2] == ["machine"]


def runs_in_a_rank(name: str) -> bool:
    parts = name.split(".")
    return parts[1:2] == ["engine"] or "rank" in parts[1:]


def test_pure_folders_import_the_standard_library_errors_and_pure_folders_only():
    def allowed(imported):
        return top(imported) in STDLIB or imported == "mlp_magic.errors" or is_pure(imported)
    found = [(name, imported) for name, path in ALL_MODULES.items() if is_pure(name)
             for imported in sorted(imports_of(path)) if not allowed(imported)]
    assert found == []


# What "pure" means (ARCHITECTURE.md): no I/O, no clock. The modules that reach files, processes,
# sockets, threads or the clock, and the calls that read the clock or touch the terminal or files.
IO_MODULES = frozenset({"os", "sys", "io", "time", "subprocess", "socket", "select", "selectors",
                        "signal", "threading", "asyncio", "multiprocessing", "concurrent", "pathlib",
                        "shutil", "tempfile", "glob", "urllib", "http", "sqlite3", "random", "uuid"})
IO_CALLS = frozenset({"open", "print", "input", "now", "today", "utcnow", "monotonic", "perf_counter"})
# os's string functions and separators: path text in, path text out (abspath only of __file__,
# which is absolute: no getcwd). Every other use of os asks the machine: os.environ, os.uname,
# os.listdir, os.getcwd, os.path.exists, os.path.realpath...
PURE_OS = frozenset({"sep", "pathsep", "fspath", "path.join", "path.dirname", "path.basename", "path.split",
                     "path.splitext", "path.normpath", "path.isabs", "path.abspath", "path.relpath",
                     "path.commonpath", "path.sep"})


def os_uses(tree: ast.AST) -> set:
    """What of ``os`` a module uses, named as ``environ`` or ``path.join``: the chains of attributes
    on the names it bound to ``os`` or ``os.path``, and what ``from os import`` brought. What
    follows (``os.pathsep.join``: a str's method) is left out."""
    bound, uses = {}, set()   # bound: a name of the module -> what of os it is ("" for os itself)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound.update({alias.asname or "os": alias.name[3:] if alias.asname else ""
                          for alias in node.names if top(alias.name) == "os"})
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "os.path") and not node.level:
            for alias in node.names:
                what = ("path." if node.module == "os.path" else "") + alias.name
                if what == "path":
                    bound[alias.asname or "path"] = what
                else:
                    uses.add(what)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            names = []
            while isinstance(node, ast.Attribute):
                names.insert(0, node.attr)
                node = node.value
            if isinstance(node, ast.Name) and node.id in bound:
                names = [*filter(None, bound[node.id].split(".")), *names]
                uses.add(".".join(names[:2]) if names[0] == "path" else names[0])
    return uses


def io_uses(tree: ast.AST) -> list:
    """os used for more than its path strings, and the calls of IO_CALLS, in a parsed module."""
    found = [f"os.{use}" for use in sorted(os_uses(tree)) if use not in PURE_OS]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in IO_CALLS:
                found.append(f"{called}() at line {node.lineno}")
    return found


def io_in(path: Path) -> list:
    """What in ``path`` does I/O or reads the clock: I/O modules imported (os: its uses), such
    calls made."""
    found = sorted(name for name in imports_of(path) if top(name) in IO_MODULES - {"os"})
    return found + io_uses(ast.parse(path.read_text()))


def test_pure_folders_do_no_io_and_read_no_clock():
    found = {name: io_in(path) for name, path in ALL_MODULES.items() if is_pure(name)}
    assert {name: what for name, what in found.items() if what} == {}


def test_the_io_finder_sees_imports_and_calls():
    module = PACKAGE / "machine" / "deadline.py"   # the clock and threads: not pure
    assert "time" in io_in(module) and any("monotonic()" in what for what in io_in(module))
    assert "os.uname" in io_in(PACKAGE / "machine" / "names.py")


def test_the_io_finder_tells_path_strings_from_asking_the_machine():
    source = ("import os\nimport os.path as osp\nfrom os import getcwd as cwd, path\n"
              "from os.path import exists, join\n"
              "os.path.join(os.sep, os.pathsep.join(['a'])), osp.dirname(''), path.basename('')\n"
              "os.environ.get('HOME'), osp.realpath('.'), path.isdir('.'), os.cpu_count()\n")
    assert io_uses(ast.parse(source)) == ["os.cpu_count", "os.environ", "os.getcwd", "os.path.exists",
                                          "os.path.isdir", "os.path.realpath"]


def test_machine_imports_the_standard_library_leaves_and_pure_folders_only():
    """What asks this machine serves every side, the ranks' too: nothing of theirs, no library."""
    def allowed(imported):
        return (top(imported) in STDLIB or imported in LEAVES or is_pure(imported)
                or asks_the_machine(imported))
    assert violations("machine", allowed) == []


def test_what_runs_in_a_rank_imports_leaves_pure_folders_machine_and_rank_code_only():
    """Code running inside each rank, on every host: nothing of the kernel's side."""
    def allowed(imported):
        return (not ours(imported) or imported in LEAVES or is_pure(imported) or asks_the_machine(imported)
                or runs_in_a_rank(imported))
    found = [(name, imported) for name, path in ALL_MODULES.items() if runs_in_a_rank(name)
             for imported in sorted(imports_of(path)) if not allowed(imported)]
    assert found == []


def test_leaves_import_the_standard_library_only():
    for name in LEAVES:
        imported = imports_of(ALL_MODULES[name])
        assert all(top(i) in STDLIB or i == "mlp_magic.errors" for i in imported), (name, imported)


def test_no_ui_library_below_the_surface():
    below = [name for name in ALL_MODULES if is_pure(name) or asks_the_machine(name) or runs_in_a_rank(name)
             or name.startswith("mlp_magic.ssh")]
    found = [(name, imported) for name in below for imported in sorted(imports_of(ALL_MODULES[name]))
             if top(imported) in UI_LIBRARIES]
    assert found == []


# ------------------------------------------------------------------------------ the layers
# Bottom to top; a module imports from its own layer or below, never above. Pure folders are
# layer 1 and rank code layer 3 wherever they sit (gpu/pure is below gpu/).
LAYERS = (
    LEAVES,                                                                 # 0 leaves
    (),                                                                     # 1 pure: core/, */pure/
    ("mlp_magic.machine",),                                                 # 2 this machine, asked
    (),                                                                     # 3 in a rank: engine/, */rank/
    ("mlp_magic.ssh", "mlp_magic.fanout", "mlp_magic.client", "mlp_magic.output"),   # 4 reaching hosts, ranks
    ("mlp_magic.gpu", "mlp_magic.agent", "mlp_magic.stacks"),               # 5 probes, agents, stacks
    ("mlp_magic.world", "mlp_magic.unblock"),                               # 6 the World
    ("mlp_magic.mpirun", "mlp_magic.values", "mlp_magic.debugging", "mlp_magic.profile",   # 7 what runs on it
     "mlp_magic.allrun", "mlp_magic.doctor", "mlp_magic.respawn"),
    ("mlp_magic.cluster",),                                                 # 8 the cluster picture
    ("mlp_magic.panel",),                                                   # 9 the panel's server
    ("mlp_magic.commands",),                                                # 10 the verbs
    ("mlp_magic",),                                                         # 11 entry points
)
# Imports that run up the layers, each with its reason in ARCHITECTURE.md ("Exceptions").
UPWARD_EXCEPTIONS: list = []


def layer(name: str) -> int:
    """Pure and rank code by their folders, the rest by the longest prefix that names it."""
    if is_pure(name):
        return 1
    if runs_in_a_rank(name):
        return 3
    matches = [(len(prefix), index) for index, prefixes in enumerate(LAYERS) for prefix in prefixes
               if name == prefix or name.startswith(prefix + ".")]
    return max(matches)[1]


def test_every_import_goes_down_the_layers():
    upward = [(name, imported) for name, path in ALL_MODULES.items() for imported in sorted(imports_of(path))
              if ours(imported) and layer(imported) > layer(name)]
    assert upward == UPWARD_EXCEPTIONS


def test_every_module_has_a_layer():
    assert [name for name in ALL_MODULES if layer(name) == len(LAYERS) - 1 and name.count(".") > 1] == []


# ------------------------------------------------------------------------------ readable folders
def folders() -> dict:
    """{folder: [module file names]} of every folder of the package."""
    found: dict = {}
    for path in PACKAGE.rglob("*.py"):
        found.setdefault(path.parent.relative_to(PACKAGE.parent).as_posix(), []).append(path.stem)
    return found


def test_no_folder_holds_more_than_20_modules():
    assert {folder: len(names) for folder, names in folders().items() if len(names) > 20} == {}


def test_no_three_modules_of_a_folder_share_a_prefix():
    """``fold_a``, ``fold_b``, ``fold_c``: that prefix is a folder that is missing."""
    shared = {}
    for folder, names in folders().items():
        prefixes: dict = {}
        for name in names:
            if "_" in name.strip("_"):
                prefixes.setdefault(name.strip("_").split("_")[0], []).append(name)
        shared.update({f"{folder}/{prefix}_*": sorted(group) for prefix, group in prefixes.items()
                       if len(group) >= 3})
    assert shared == {}


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
OURS_AT_IMPORT = {"mlp_magic", "mlp_magic.errors", "mlp_magic.allrun", "mlp_magic.allrun.command",
                  "mlp_magic.ssh", "mlp_magic.ssh.interrupts"}
# The options come from the one table of verbs and its parser (commands/pure, core/options):
# pure, standard library only, loaded before the first ssh starts.
OURS_AT_START = OURS_AT_IMPORT | {
    "mlp_magic.commands", "mlp_magic.commands.pure", "mlp_magic.commands.pure.options",
    "mlp_magic.commands.pure.parse", "mlp_magic.commands.pure.table", "mlp_magic.core.options",
    "mlp_magic.config", "mlp_magic.core", "mlp_magic.core.host_command", "mlp_magic.core.hostfile",
    "mlp_magic.core.ranges", "mlp_magic.core.records", "mlp_magic.core.results",
    "mlp_magic.core.topology", "mlp_magic.core.rank_variables", "mlp_magic.allrun.plan",
    "mlp_magic.ssh", "mlp_magic.ssh.argv", "mlp_magic.ssh.spawn",
    # this machine's environment, names and hostfile (core/topology's parsing given them)
    "mlp_magic.machine", "mlp_magic.machine.names", "mlp_magic.machine.topology",
    "mlp_magic.machine.user_files",
}
AT_START = r"""
import os, sys
from mlp_magic.ssh import spawn
def report(launch):   # where the first host's ssh would start: stop here
    print(*sorted(sys.modules)); sys.stdout.flush(); os._exit(0)
spawn.Launch.start_all = report
from mlp_magic.allrun import command
command.main(["--json", "--", "true"])
"""
AT_IMPORT = "import sys\nimport mlp_magic.allrun.command\nprint(*sorted(sys.modules))"


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
from mlp_magic.ssh import spawn
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
    later = {"mlp_magic.stacks.pure.jobs", "mlp_magic.stacks.pure.frames", "mlp_magic.stacks.pure.render",
             "mlp_magic.stacks.pure.tree", "dataclasses", "asyncio", "ssl"}
    assert modules_now & later == set()


# ------------------------------------------------------------------------------ no circles
def circles(graph: dict) -> list:
    """The strongly connected groups of more than one module in ``{module: {imports}}`` (Tarjan's
    algorithm, iterative: the package is deeper than Python's recursion is comfortable with)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(found)


def test_the_circle_finder_finds_circles():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set(), "c": {"c"}}) == []


def test_no_circles_of_imports():
    """Two modules that import each other (a lazy import too) are one concept cut in two, or a
    state with two owners (world/attach and world/world; unblock/rank/regroup and side were)."""
    # the package itself is left out: its __init__ loads the extension (magics) lazily
    graph = {name: {imported for imported in imports_of(path)
                    if imported in ALL_MODULES and imported != "mlp_magic"}
             for name, path in ALL_MODULES.items() if name != "mlp_magic"}
    assert circles(graph) == []
