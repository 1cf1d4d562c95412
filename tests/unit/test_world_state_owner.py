"""One owner of the World's state (issue 44): outside ``mlp_magic/world/`` no code assigns,
deletes or mutates in place an attribute a World sets in ``World.__init__`` (which job is busy,
the ranks' engines, the dead ranks, the lost hosts, ...); it asks the World (claim, release,
died, hosts_lost). Read from the modules' own source."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mlp_magic"
MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem",
                      "remove", "discard", "clear"})


def world_state_names() -> set:
    """The attributes ``World.__init__`` sets on ``self``."""
    tree = ast.parse((PACKAGE / "world" / "world.py").read_text())
    world = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "World")
    init = next(node for node in world.body if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    return {target.attr for node in ast.walk(init) for target in _targets(node)
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            and target.value.id == "self"}


def _targets(node) -> list:
    if isinstance(node, ast.Assign):
        return [leaf for target in node.targets for leaf in _flat(target)]
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    return []


def _flat(target) -> list:
    return [leaf for element in target.elts for leaf in _flat(element)] \
        if isinstance(target, (ast.Tuple, ast.List)) else [target]


def _is_a_world(node) -> bool:
    """``world``, ``self.world``, ``cell.world``, ``shared_world``: what holds a World."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name == "world" or name.endswith("_world")


def _world_state(node, names: set) -> str | None:
    """``<a world>.<state>`` (or a subscript of it): the state's name, else None."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute) and node.attr in names and _is_a_world(node.value):
        return node.attr
    return None


def state_changes(path: Path, names: set) -> list:
    """[(line, state)] where ``path`` changes a World's state."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        changed = [_world_state(target, names) for target in _targets(node)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            changed.append(_world_state(node.func.value, names))
        found += [(node.lineno, state) for state in changed if state]
    return found


def test_the_checker_sees_assignments_subscripts_deletions_and_mutations(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("world.busy_job = None\nself.world.dead_ranks[2] = 'x'\n"
                      "del cell.world.lost_hosts['h']\n"
                      "world.rank_to_engine.update({})\nworld.layout.sort()\nother.dead_ranks = {}\n"
                      "x = world.dead_ranks\n")
    names = {"busy_job", "dead_ranks", "lost_hosts", "rank_to_engine", "layout"}
    assert state_changes(sample, names) == [(1, "busy_job"), (2, "dead_ranks"), (3, "lost_hosts"),
                                            (4, "rank_to_engine")]


def test_only_the_world_changes_its_state():
    names = world_state_names()
    assert {"dead_ranks", "rank_to_engine", "lost_hosts", "client"} <= names
    outside = [(str(path.relative_to(PACKAGE)), line, state)
               for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE).parts[0] != "world"
               for line, state in state_changes(path, names)]
    assert outside == []
