"""Which source files are the user's code, and how to name them so ranks compare equal (pure).

User code is what a user debugging a rank wants to see: notebook cells, the script run by
``%mpirun script.py``, and any file of theirs. Library code is everything else: the standard
library, site-packages / dist-packages (torch, IPython, ipykernel...), frozen modules, and
the folders the caller adds (mlp_magic's own package, whose frames run the cells).
"""
from __future__ import annotations

import os
import re

# Cell code as IPython/ipykernel names it (ipykernel: <tmp>/ipykernel_<pid>/<hash>.py; the pid
# differs from rank to rank, hence one display name for all of them).
_KERNEL_CELL = re.compile(r"^(.*/ipykernel_\d+/\d+\.py|<ipython-input-[\d-]+-\w+>)$")
_CELL_FILE = re.compile(r"^(.*/ipykernel_\d+/\d+\.py|<ipython-input-[\d-]+-\w+>|<cell line: \d+>"
                        r"|<string>|<cell>)$")
_LIBRARY = re.compile(r"(site-packages|dist-packages)/|/lib/python3\.\d+/(?!site-packages)"
                      r"|\.so(\.[\d.]+)?$")   # the last: a native frame's shared object
_PACKAGE_PATH = re.compile(r"(?:site-packages|dist-packages)/(.*)$")
_COMPILED_SOURCE = re.compile(r"\.(pyx|pxi|pxd)$")   # Cython: numpy, mpi4py, pandas internals
# mlp_magic's own folder: its frames run the cells and scripts, they are not the user's code
OWN_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB_PATH = re.compile(r"/lib/python3\.\d+/(.*)$")


def is_cell(path: str) -> bool:
    return bool(_CELL_FILE.match(path))


def is_kernel_cell(path: str) -> bool:
    """A cell as a kernel names it: the name differs from rank to rank (``stack_report.CELL``)."""
    return bool(_KERNEL_CELL.match(path))


def is_user_code(path: str, library_dirs=(OWN_PACKAGE,)) -> bool:
    """Cells and files outside the Python installation, site-packages and ``library_dirs``.
    Other names in angle brackets (``<frozen importlib._bootstrap>``) are Python's own; so are
    Cython sources (``numpy/random/_generator.pyx``, ``mpi4py/MPI.pyx``: compiled modules report
    the relative path they were built from)."""
    if is_cell(path):
        return True
    if path.startswith("<") or _LIBRARY.search(path) or _COMPILED_SOURCE.search(path):
        return False
    return not any(_inside(path, folder) for folder in library_dirs)


def _inside(path: str, folder: str) -> bool:
    folder = folder.rstrip("/")
    return bool(folder) and (path == folder or path.startswith(folder + "/"))


def display_name(path: str) -> str:
    """``cell`` for cells, the path inside site-packages for libraries, else the path."""
    if is_cell(path):
        return "cell"
    match = _PACKAGE_PATH.search(path)
    return match.group(1) if match else path


def short_path(path: str) -> str:
    """The compact name of the stack views: ``cell`` for a cell, the module path inside an
    installed package or the standard library, the file's name for the rest (the full path stays
    in the dumps and in ``--json``); python -c's ``<string>`` is itself."""
    if is_cell(path) and path != "<string>":
        return "cell"
    match = _PACKAGE_PATH.search(path) or _STDLIB_PATH.search(path)
    if match:
        return match.group(1)
    return path.rsplit("/", 1)[-1] or path
