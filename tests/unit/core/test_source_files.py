"""Which files are user code (cells, scripts, the user's own modules) and how they are named."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.source_files import display_name, is_cell, is_user_code


@pytest.mark.parametrize("path", [
    "/tmp/ipykernel_20013/2808617260.py", "/scratch/tmp/ipykernel_7/1.py", "<ipython-input-3-5f2a1b>",
    "<cell line: 4>", "<string>",
])
def test_cells(path):
    assert is_cell(path) and is_user_code(path) and display_name(path) == "cell"


@pytest.mark.parametrize("path, user", [
    ("/home/ana/project/train.py", True),
    ("/work/data/loader.py", True),
    ("train.py", True),
    ("/work/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", False),
    ("/usr/lib/python3/dist-packages/numpy/core/fromnumeric.py", False),
    ("/usr/local/lib/python3.11/threading.py", False),
    ("/opt/conda/lib/python3.12/asyncio/events.py", False),
    ("<frozen importlib._bootstrap>", False),
    ("<frozen runpy>", False),
    ("numpy/random/_generator.pyx", False),   # compiled Cython reports its build-relative source
    ("mpi4py/MPI.pyx", False),
    ("/src/pandas/_libs/index.pyx", False),
    ("/tmp/ipykernel_1/x.py", True),          # not a cell name, but a file outside any library
])
def test_user_code(path, user):
    assert is_user_code(path) is user


def test_mlp_magic_itself_is_not_user_code_by_default():
    from mlp_magic.core.source_files import OWN_PACKAGE
    from mlp_magic.debugging.rank import script

    assert not is_user_code(script.__file__) and script.__file__.startswith(OWN_PACKAGE + "/")


def test_library_dirs_are_not_user_code():
    own = "/work/main/mlp_magic"
    assert not is_user_code("/work/main/mlp_magic/engine/script.py", (own,))
    assert not is_user_code(own, (own + "/",))
    assert is_user_code("/work/main/mlp_magic_examples/train.py", (own,))   # a prefix, not the folder
    assert is_user_code("/work/main/train.py", (own, ""))                    # an empty folder names nothing


def test_display_names():
    path = "/work/venv/lib/python3.11/site-packages/torch/nn/functional.py"
    assert display_name(path) == "torch/nn/functional.py"
    assert display_name("/home/ana/train.py") == "/home/ana/train.py"


SEGMENT = st.text(st.sampled_from("abc_.-0123456789"), min_size=1, max_size=8)


@given(head=st.lists(SEGMENT, max_size=4), tail=st.lists(SEGMENT, min_size=1, max_size=4),
       where=st.sampled_from(["site-packages", "dist-packages"]))
def test_anything_in_site_packages_is_a_library(head, tail, where):
    path = "/" + "/".join([*head, where, *tail])
    assert not is_user_code(path)
    assert display_name(path) == "/".join(tail)


@given(head=st.lists(SEGMENT, min_size=1, max_size=4), tail=st.lists(SEGMENT, min_size=1, max_size=4))
def test_anything_under_a_library_dir_is_a_library(head, tail):
    folder = "/" + "/".join(head)
    assert not is_user_code(folder + "/" + "/".join(tail), (folder,))
