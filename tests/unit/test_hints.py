"""One dialect of type hints (ARCHITECTURE.md): the builtins (``dict[str, int]``), ``X | None``,
and the abstract types of ``collections.abc``; ``typing`` only for what it alone has. Its import
also costs the allrun command's start, which imports these modules before its first ssh."""
from __future__ import annotations

import ast

from tests.unit.test_layout import ALL_MODULES

TYPING_ALONE = {"Any", "NamedTuple", "TYPE_CHECKING", "Union"}   # Union: a runtime alias (3.9 has no |)
OLD_GENERICS = {"Optional", "Dict", "List", "Tuple", "Set", "FrozenSet", "Type", "DefaultDict"}


def other_dialect(source: str) -> list:
    """What ``source`` writes in the other dialect: typing's names that collections.abc or the
    builtins have, and a Union anywhere but a module-level alias."""
    tree = ast.parse(source)
    found = [f"from typing import {alias.name}" for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and node.module == "typing"
             for alias in node.names if alias.name not in TYPING_ALONE]
    found += [f"{node.value.id}[...] (line {node.lineno})" for node in ast.walk(tree)
              if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
              and node.value.id in OLD_GENERICS]
    aliases = {id(node.value) for node in tree.body if isinstance(node, ast.Assign)}
    found += [f"Union[...] (line {node.lineno}): write X | Y" for node in ast.walk(tree)
              if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
              and node.value.id == "Union" and id(node) not in aliases]
    return found


def test_the_finder_sees_the_other_dialect():
    assert other_dialect("from typing import Any, Optional\nx: Optional[int] = None\n") == [
        "from typing import Optional", "Optional[...] (line 2)"]
    union = "from typing import Union\nA = Union[int, str]\ndef f(a: Union[int, str]): pass\n"
    assert other_dialect(union) == ["Union[...] (line 3): write X | Y"]
    assert other_dialect("from collections.abc import Callable\nx: dict[str, int] | None = None\n") == []


def test_every_module_writes_hints_in_one_dialect():
    assert {name: found for name, path in ALL_MODULES.items()
            if (found := other_dialect(path.read_text()))} == {}
