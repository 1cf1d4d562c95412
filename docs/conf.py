"""Sphinx configuration of the mlp_magic docs (MyST Markdown; example notebooks executed).

Build: ``bash scripts/build-docs.sh`` (warnings are errors). ``MLP_DOCS_EXECUTE=off`` skips
running the example notebooks, for a quick look at the text.
"""
import os
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))

project = "mlp_magic"
author = "the mlp_magic developers"
copyright = "2026, the mlp_magic developers"

extensions = ["myst_nb", "sphinx.ext.autodoc", "mlp_docs"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "examples/.ipynb_checkpoints"]
nitpicky = True
# The examples write IPython syntax (`!cmd`, `$var`) that the Python highlighter trips over.
suppress_warnings = ["misc.highlighting_failure"]
autodoc_typehints = "none"
autodoc_member_order = "bysource"

# The example notebooks run during the build, on local ranks: every output shown is real. They
# show failing ranks on purpose (a rank's nan, a traceback), so a cell's error is part of the page.
nb_execution_mode = "off" if os.environ.get("MLP_DOCS_EXECUTE") == "off" else "force"
nb_execution_timeout = 300
nb_execution_allow_errors = True
nb_execution_raise_on_error = True
nb_execution_show_tb = True
EXAMPLES = ("01-hello-ranks.ipynb", "03-allrun.ipynb", "05-many-ranks.ipynb", "06-debug-a-rank.ipynb")

html_theme = "furo"
html_title = "mlp_magic"
html_static_path = []


def _copy_examples() -> None:
    """The notebooks live in examples/ (the tests run them too); the docs execute copies."""
    target = DOCS / "examples"
    target.mkdir(exist_ok=True)
    for name in EXAMPLES:
        shutil.copyfile(ROOT / "examples" / name, target / name)


_copy_examples()
