"""The variables that name a rank are listed once (issue 44): core/rank_variables, which every
reader imports. A literal name elsewhere is a second list that can drift (three lists once
differed: which MPI's local rank a helper knew, and in which order the families were asked)."""
from __future__ import annotations

import ast
from pathlib import Path

from mlp_magic.core import rank_variables

PACKAGE = Path(rank_variables.__file__).resolve().parents[1]
NAMES = {*rank_variables.MPI_RANK,
         *rank_variables.MPI_RANK_SIZE.values(), *rank_variables.MPI_LOCAL_RANK,
         rank_variables.WORLD_RANK, rank_variables.WORLD_SIZE, rank_variables.WORLD_ID,
         rank_variables.RESPAWNED_RANK, rank_variables.RESPAWNED_SIZE}


def literal_names(source: str) -> set:
    """The rank variables ``source`` spells as string literals (docstrings aside)."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in NAMES and id(node) not in docstrings}


def test_the_finder_sees_literals_and_not_docstrings():
    source = ('"""Reads OMPI_COMM_WORLD_RANK."""\nimport os\n'
              'os.environ.get("PMI_RANK")\nx = {"MPI_LOCALRANKID": 1}')
    assert literal_names(source) == {"PMI_RANK", "MPI_LOCALRANKID"}


def test_no_module_but_rank_variables_spells_a_rank_variable():
    spelled = {str(path.relative_to(PACKAGE)): literal_names(path.read_text())
               for path in PACKAGE.rglob("*.py") if path.name != "rank_variables.py"}
    assert {where: names for where, names in spelled.items() if names} == {}


def test_a_ranks_own_number_asks_a_respawn_then_the_worlds_numbering_and_every_mpi_family():
    # a respawned rank's launcher says rank 0 of the spawned job: its own variable comes first
    assert rank_variables.OWN_RANK[:2] == (rank_variables.RESPAWNED_RANK, rank_variables.WORLD_RANK)
    assert set(rank_variables.OWN_RANK[2:]) == set(rank_variables.MPI_RANK_SIZE)
    assert rank_variables.OWN_LOCAL_RANK == (rank_variables.TORCH_LOCAL_RANK, *rank_variables.MPI_LOCAL_RANK)
