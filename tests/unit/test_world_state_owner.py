"""Only world/ changes a World's state (ARCHITECTURE.md): elsewhere a World is asked
(``claim``, ``release_busy``, ``hosts_lost``), never written to, so that what a World holds
(its busy job, its lost hosts) has one owner. Likewise a cell in flight (mpirun/cell.Cell): how
it ended is told to it once a follow ends (``ended``), never set field by field elsewhere."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mlp_magic"
OWNER = PACKAGE / "world"
MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update",
                      "setdefault", "add", "discard"})


WORLD = ("world", "_world")
CELL = ("cell", "_cell")


def _names_a(node: ast.AST, names: tuple) -> bool:
    """``world``, ``self._world``, ``job.world``... (``names``) or anything reached through one."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and node.attr in names:
            return True
        node = node.value
    return isinstance(node, ast.Name) and node.id in names


def _written_part(target: ast.AST) -> ast.AST | None:
    """What an assignment to ``target`` writes into (None: a plain name, which writes nothing)."""
    return target.value if isinstance(target, (ast.Attribute, ast.Subscript)) else None


def writes_to_a_world(source: str, names: tuple = WORLD) -> list:
    """[(line, code)] of each place ``source`` changes a World (or what ``names`` name): an
    assignment to one of its attributes or items, or a mutating call on one of them
    (``world.lost_hosts.update(...)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        written = [part for part in map(_written_part, targets) if part is not None]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in MUTATORS:
            written.append(_written_part(node.func))   # world.gpus.update(): world.gpus's owner
        if any(_names_a(part, names) for part in written):
            found.append((node.lineno, ast.unparse(node)[:100]))
    return sorted(found)


def test_the_finder_sees_assignments_and_mutating_calls_on_a_world():
    assert [line for line, _ in writes_to_a_world(
        "world.busy_job = cell\n"             # 1: an attribute
        "job.world.busy_job = None\n"         # 2: through another object
        "world.lost_hosts[h] = ranks\n"       # 3: an item of one
        "self._world.gpus.update(found)\n"    # 4: a mutating call
        "world.layout += rows\n"              # 5: an augmented assignment
        "world = other\n"                     # a name: nothing of a World changes
        "self.world = world\n"                # an object holding a World: its own attribute
        "cell.outcome = world.busy_job\n"     # reading a World
        "world.live.cell_ended(d)\n"          # asking a World's part
    )] == [1, 2, 3, 4, 5]


def test_only_world_changes_a_worlds_state():
    outside = [path for path in sorted(PACKAGE.rglob("*.py")) if OWNER not in path.parents]
    found = {str(path.relative_to(PACKAGE)): writes for path in outside
             if (writes := writes_to_a_world(path.read_text()))}
    assert found == {}, "ask the World (world/world.py) instead of changing it"


def test_only_mpirun_cell_changes_a_cells_state():
    owner = PACKAGE / "mpirun" / "cell.py"
    assert [line for line, _ in writes_to_a_world("cell.quit = True\ncell.finished_shown.update(r)\n"
                                                  "cell.ended(ending)\n", CELL)] == [1, 2]
    found = {str(path.relative_to(PACKAGE)): writes for path in sorted(PACKAGE.rglob("*.py"))
             if path != owner and (writes := writes_to_a_world(path.read_text(), CELL))}
    assert found == {}, "tell the cell how it ended (Cell.ended) instead of setting its fields"
